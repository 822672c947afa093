package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// A session (SPEC §17.5) is an overlay of mocks and faults on some
// proxies, in force only for the requests that carry its id. It is never
// part of the document or its revision.

// DefaultSessionHeader carries a request's session id unless
// server.session_header names another.
const DefaultSessionHeader HeaderName = "X-Doppel-Session"

// SessionHeaderOf is the header a document's requests carry their session
// in.
func SessionHeaderOf(d *Document) HeaderName {
	if d.Server.SessionHeader != "" {
		return d.Server.SessionHeader
	}
	return DefaultSessionHeader
}

// Session is a session's body, as POST and PUT /api/v1/sessions take it.
type Session struct {
	ID       SessionID                  `yaml:"id,omitempty" doc:"The session's id; chosen by Doppel (22 URL-safe characters) when left out. Only on create."`
	TTL      *SessionTTL                `yaml:"ttl,omitempty" doc:"Seconds until the session ends by itself, 1 to 86400; counted again from each update. Defaults to 600."`
	Revision Revision                   `yaml:"revision,omitempty" doc:"On update, the revision the change is based on (or If-Match)."`
	Proxies  map[ProxyName]SessionProxy `yaml:"proxies" required:"true" doc:"Proxy name -> what the session adds to it: mocks tried before the proxy's, and faults that replace the proxy's."`
}

// SessionProxy is what a session lays over one proxy: its mocks come
// before the proxy's, each fault it declares replaces the proxy's.
type SessionProxy struct {
	Mocks     []Mock     `yaml:"mocks,omitempty" doc:"Tried before the proxy's own, in order."`
	Replace   *Ratio     `yaml:"replace,omitempty" doc:"Replaces the proxy's replace for this session's requests."`
	Loss      *Loss      `yaml:"loss,omitempty" doc:"Replaces the proxy's loss for this session's requests."`
	Latency   *Latency   `yaml:"latency,omitempty" doc:"Replaces the proxy's latency for this session's requests."`
	Abort     *Abort     `yaml:"abort,omitempty" doc:"Replaces the proxy's abort for this session's requests."`
	Hang      *Hang      `yaml:"hang,omitempty" doc:"Replaces the proxy's hang for this session's requests."`
	Bandwidth *Bandwidth `yaml:"bandwidth,omitempty" doc:"Replaces the proxy's bandwidth for this session's requests."`
}

// Session bounds.
const DefaultSessionTTL SessionTTL = 600

const (
	maxSessionTTL = 86400
	maxSessionID  = 64
)

// MaxSessionSize bounds a session's body (SPEC §18.4): what one caller may
// make every replica keep until it expires.
const MaxSessionSize = 256 << 10

// SessionTTL is a session's lifetime in whole seconds, 1..86400.
type SessionTTL int

func (v *SessionTTL) UnmarshalYAML(n ast.Node) error {
	i, err := integerValue(n, "a whole number of seconds")
	if err != nil {
		return err
	}
	if i < 1 || i > maxSessionTTL {
		return refuse(n, "%d is not a session's ttl: 1 to %d seconds (a day); leave it out for %d", i, maxSessionTTL, DefaultSessionTTL)
	}
	*v = SessionTTL(i)
	return nil
}

func (SessionTTL) jsonSchema() map[string]any {
	return num("integer", "Seconds until the session ends by itself.", 1, maxSessionTTL, 300)
}

// SessionID is a session's id: 1 to 64 letters, digits, - and _.
type SessionID string

// ValidSessionID reports whether s can be a session's id. Every request
// naming a session asks, so it is a loop, not a regular expression.
func ValidSessionID(s string) bool {
	if len(s) == 0 || len(s) > maxSessionID {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

func (v *SessionID) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "a session id")
	if err != nil {
		return err
	}
	if !ValidSessionID(s) {
		return refuse(n, "%s is not a session id: 1 to %d letters, digits, - and _ (it travels in a header and a URL)", quote(s), maxSessionID)
	}
	*v = SessionID(s)
	return nil
}

func (SessionID) jsonSchema() map[string]any {
	return str("1 to 64 letters, digits, - and _.", "pattern", "^[A-Za-z0-9_-]{1,64}$")
}

// Faults are the overlay's faults, side by side.
func (o *SessionProxy) Faults() Faults {
	return Faults{Loss: o.Loss, Latency: o.Latency, Abort: o.Abort, Hang: o.Hang, Bandwidth: o.Bandwidth}
}

// Over is base with the overlay laid on it: the overlay's mocks first,
// each fault and replace it declares instead of base's. base is not
// changed.
func (o *SessionProxy) Over(base *Proxy) *Proxy {
	p := *base
	p.Mocks = append(slices.Clone(o.Mocks), base.Mocks...)
	if o.Replace != nil {
		p.Replace = o.Replace
	}
	p.setFaults(o.Faults().over(base.Faults()))
	return &p
}

// ParseSession reads a session's body against the proxies of doc: every
// value is checked, every proxy named must exist, and each overlay obeys
// the rules of a proxy's own fields and mocks, paths under
// proxies.<name>. Like a document, the body is checked whole: a refused
// value does not hide the rules on what did parse, and an unknown proxy
// does not hide what is wrong in its overlay.
func ParseSession(src []byte, doc *Document) (*Session, error) {
	root, err := parseRoot(src)
	if err != nil {
		return nil, err
	}
	rules := func(s *Session) []Violation { return sessionRules(s, doc) }
	if vs := check(root, reflect.TypeFor[Session]()); len(vs) > 0 {
		vs = append(vs, onWhatParsed(root, vs, rules)...)
		return nil, &Invalid{Violations: vs}
	}
	var s Session
	if err := yaml.NodeToValue(root, &s, yaml.DisallowUnknownField()); err != nil {
		return nil, invalid(decodeViolation(err, root))
	}
	s.Normalize()
	if vs := rules(&s); len(vs) > 0 {
		for i := range vs {
			vs[i].Line = lineOfPath(root, vs[i].Path)
		}
		return nil, &Invalid{Violations: vs}
	}
	if s.TTL == nil {
		ttl := DefaultSessionTTL
		s.TTL = &ttl
	}
	return &s, nil
}

// Normalize drops a mock's empty proxy block, as a document's proxy does.
func (s *Session) Normalize() {
	for name, o := range s.Proxies {
		for i := range o.Mocks {
			if m := &o.Mocks[i]; m.Proxy != nil && *m.Proxy == (MockOverride{}) {
				m.Proxy = nil
			}
		}
		s.Proxies[name] = o
	}
}

// sessionRules are the rules a session obeys over the proxies of doc.
func sessionRules(s *Session, doc *Document) []Violation {
	var vs []Violation
	for _, name := range slices.Sorted(maps.Keys(s.Proxies)) {
		at := "proxies." + string(name)
		base := doc.Proxy(string(name))
		switch {
		case base == nil:
			vs = append(vs, Violation{Path: at, Message: fmt.Sprintf("no proxy is named %s; a session lays mocks and faults over proxies that exist", quote(string(name)))})
			// Its overlay is checked all the same, over a bare proxy, so
			// that fixing the name brings no second round.
			base = &Proxy{Name: name}
		case base.Type == KindTCP:
			vs = append(vs, Violation{Path: at, Message: fmt.Sprintf("%s is a tcp proxy: a session applies to the HTTP requests that carry its id, and a connection carries none", quote(string(name)))})
			continue
		}
		vs = append(vs, validateOverlay(at, *base, s.Proxies[name])...)
	}
	if len(s.Proxies) == 0 {
		vs = append(vs, Violation{Path: "proxies", Message: "a session names at least one proxy"})
	}
	return vs
}

// validateOverlay holds an overlay's own mocks and faults to the proxy's
// rules (the base is valid already); its mocks' indices are the session's.
func validateOverlay(at string, base Proxy, o SessionProxy) []Violation {
	own := base
	own.Mocks = o.Mocks
	own.setFaults(o.Faults())
	return validateFaultsAndMocks(at, own)
}
