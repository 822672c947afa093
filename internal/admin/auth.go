package admin

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/doppelproxy/doppel/internal/config"
)

// EnvTokens is the variable that adds tokens from the environment.
const EnvTokens = "DOPPEL_ADMIN_TOKENS"

// Token is one admin token and who holds it.
type Token struct {
	Name  config.Name
	Group config.Name
	Value config.Token
}

// ParseEnvTokens reads DOPPEL_ADMIN_TOKENS: a JSON object of name →
// {token, group?}, group defaulting to `user`. Every field obeys the rules
// the document's tokens do. Errors name the variable and the entry, never
// a token's value. Empty means none.
func ParseEnvTokens(raw string) ([]Token, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var entries map[string]struct {
		Token *string `json:"token"`
		Group *string `json:"group"`
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object of name -> {\"token\", \"group\"}: %s", EnvTokens, jsonReason(err))
	}
	var out []Token
	seen := map[config.Token]string{}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		e := entries[name]
		n, err := config.ParseName(name)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %q: %v", EnvTokens, name, err)
		}
		if e.Token == nil {
			return nil, fmt.Errorf("%s: entry `%s` has no token", EnvTokens, name)
		}
		tok, err := config.ParseToken(*e.Token)
		if err != nil {
			return nil, fmt.Errorf("%s: entry `%s` is not usable: %v", EnvTokens, name, err)
		}
		if other, dup := seen[tok]; dup {
			return nil, fmt.Errorf("%s: entries `%s` and `%s` have the same token", EnvTokens, other, name)
		}
		seen[tok] = name
		group := config.GroupUser
		if e.Group != nil {
			if group, err = config.ParseName(*e.Group); err != nil {
				return nil, fmt.Errorf("%s: entry `%s`: group: %v", EnvTokens, name, err)
			}
		}
		out = append(out, Token{Name: n, Group: group, Value: tok})
	}
	return out, nil
}

// jsonReason keeps the position and kind of a JSON error without echoing
// the input, which holds secrets.
func jsonReason(err error) string {
	switch e := err.(type) {
	case *json.SyntaxError:
		return fmt.Sprintf("invalid JSON at byte %d", e.Offset)
	case *json.UnmarshalTypeError:
		return fmt.Sprintf("%s must be %s", e.Field, e.Type)
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field") {
		return msg
	}
	return "invalid JSON"
}

// Caller is who a request comes from.
type Caller struct {
	Anonymous bool
	Name      config.Name
	Group     config.Name
	// sent is what an anonymous caller presented, for the 401 to say;
	// header is where it was read.
	sent   presented
	header string
	// value is the token presented, for the proof a fleet call carries.
	value config.Token
}

// presented is what an anonymous caller sent in place of a known token.
type presented int

const (
	sentNothing   presented = iota // neither header was sent
	sentNotBearer                  // a header without the Bearer scheme
	sentUnknown                    // a bearer token no token in force has
)

// tokens are those in force: the environment's first, then the
// document's, less any whose name the environment claims.
func tokensInForce(doc *config.Document, env []Token) []Token {
	out := slices.Clone(env)
	for _, t := range doc.Admin.Tokens {
		if slices.ContainsFunc(env, func(e Token) bool { return e.Name == t.Name }) {
			continue
		}
		out = append(out, Token{Name: t.Name, Group: t.Group, Value: t.Token})
	}
	return out
}

// identify finds the caller from the bearer token in the configured
// header, else in the standard Authorization header (Swagger UI's
// Authorize, curl's habits). Every token is compared, in constant time
// over fixed-size digests, so the answer's timing says nothing about which
// tokens are close, nor how long any of them is.
func identify(r *http.Request, doc *config.Document, env []Token) Caller {
	header := string(doc.Admin.Auth.Header)
	raw := r.Header.Get(header)
	if raw == "" {
		if raw = r.Header.Get("Authorization"); raw != "" {
			header = "Authorization"
		}
	}
	if raw == "" {
		return Caller{Anonymous: true, sent: sentNothing, header: header}
	}
	value, ok := config.Bearer(raw)
	if !ok {
		return Caller{Anonymous: true, sent: sentNotBearer, header: header}
	}
	digest := config.DigestOf(value)
	found := Caller{Anonymous: true, sent: sentUnknown, header: header}
	for _, t := range tokensInForce(doc, env) {
		want := config.DigestOf(string(t.Value))
		if subtle.ConstantTimeCompare(digest[:], want[:]) == 1 && found.Anonymous {
			found = Caller{Name: t.Name, Group: t.Group, value: t.Value}
		}
	}
	return found
}

// unauthorized is the 401's message: what was sent in place of a known
// token, never the token itself, and what to send instead.
func (c Caller) unauthorized(doc *config.Document) string {
	want := string(doc.Admin.Auth.Header) + ": Bearer <token>"
	switch c.sent {
	case sentNotBearer:
		return "no token was sent: " + c.header + " is not of the form `Bearer <token>`; send " + want
	case sentUnknown:
		return "Doppel does not know the token sent in " + c.header + ": check it, or ask for one with `doppel token add`"
	}
	return "no token was sent: this action needs one; send " + want
}

// Action is one of the six admin actions.
type Action string

const (
	ActList   Action = "list"
	ActRead   Action = "read"
	ActCreate Action = "create"
	ActUpdate Action = "update"
	ActDelete Action = "delete"
	ActUpload Action = "upload"
)

var actions = []Action{ActList, ActRead, ActCreate, ActUpdate, ActDelete, ActUpload}

// allowed is the one decision function: the endpoints, /api/v1/access and
// the dashboard all ask it. proxy is the proxy acted on, nil for none; its
// overrides apply to read, update, delete and upload.
func allowed(doc *config.Document, c Caller, act Action, proxy *config.Proxy) bool {
	a := &doc.Admin
	if a.IsPublic() {
		return true
	}
	subjects := globalSubjects(&a.Access, act)
	if proxy != nil && proxy.Access != nil {
		if s := proxySubjects(proxy.Access, act); s != nil {
			subjects = s
		}
	}
	if subjects == nil {
		def := config.AdminSubjects()
		subjects = &def
	}
	if subjects.Public {
		return true
	}
	if c.Anonymous {
		return false
	}
	return slices.Contains(subjects.Names, c.Name) || slices.Contains(subjects.Names, c.Group)
}

func globalSubjects(a *config.Access, act Action) *config.Subjects {
	for _, x := range a.Actions() {
		if x.Name == string(act) {
			return x.Subjects
		}
	}
	return nil
}

func proxySubjects(a *config.ProxyAccess, act Action) *config.Subjects {
	for _, x := range a.Actions() {
		if x.Name == string(act) {
			return x.Subjects
		}
	}
	return nil
}
