package config

import (
	"cmp"
	"maps"
	"slices"
)

// The document model: what the user wrote, in the user's words. Struct tags
// drive three things at once: `yaml` names the key, `required` makes it
// mandatory, and `doc` is its description in the JSON Schema.
//
// Optional settings whose default is not the zero value are pointers while
// the document is decoded, so absence can be told from an explicit value;
// Normalize fills every default in, after which none of them is nil.

// Document is one whole configuration.
type Document struct {
	Server    Server     `yaml:"server" required:"true" doc:"Where the proxy listens for the traffic being forwarded or mocked."`
	Admin     Admin      `yaml:"admin" required:"true" doc:"The admin API's listener, its tokens, and who may do what."`
	Proxies   []Proxy    `yaml:"proxies" doc:"The proxies this instance serves, in the order they are tried. May be empty or left out: requests are then answered 503 NO_PROXIES_CONFIGURED."`
	Logging   Logging    `yaml:"logging" doc:"Log level and output format."`
	Control   Control    `yaml:"control" doc:"The Unix socket that doppel config reload and doppel token add talk to."`
	Templates Templates  `yaml:"templates" doc:"Where mock template files are read from and uploaded to."`
	Sentry    *Sentry    `yaml:"sentry,omitempty" doc:"Optional error reporting. Absent, or an empty DSN, disables it."`
	Journal   *Journal   `yaml:"journal,omitempty" doc:"The request journal: the newest requests of the proxy listener, kept in memory for the admin API (GET /api/v1/requests). On by default."`
	Toxiproxy *Toxiproxy `yaml:"toxiproxy,omitempty" doc:"A listener speaking Toxiproxy 2.x's HTTP API over Doppel's TCP relay, for Toxiproxy's clients. Off when absent; what its clients create lives in memory, not in this document."`
}

// Server is the proxy listener.
type Server struct {
	Host        Host         `yaml:"host" required:"true" doc:"The IP address the proxy listener binds (not a hostname)."`
	Port        Port         `yaml:"port" required:"true" doc:"The TCP port proxied traffic arrives on. Must differ from admin.port."`
	ExternalURL *ExternalURL `yaml:"external_url,omitempty" doc:"Where clients reach this Doppel, when that is not host:port (behind a port mapping or an ingress). Used to rewrite redirects and body URLs. DOPPEL_EXTERNAL_URL overrides it."`
	// SessionHeader is left out of the canonical form when unset, so that
	// a document written before sessions keeps its revision.
	SessionHeader HeaderName `yaml:"session_header,omitempty" doc:"The header a request carries its session's id in (SPEC §17.5). Defaults to X-Doppel-Session."`
	TLS           *TLS       `yaml:"tls,omitempty" doc:"Serve HTTPS (HTTP/2 and HTTP/1.1) on the proxy listener: {cert, key} PEM files, or {auto: true} for a certificate under a CA Doppel makes. Absent serves plain HTTP (and h2c)."`
}

// Admin is the admin listener and its access policy.
type Admin struct {
	Enable    *bool          `yaml:"enable" doc:"Whether to run the admin listener at all. Defaults to true; false binds nothing, leaving the control socket as the only way in."`
	Dashboard *bool          `yaml:"dashboard" doc:"Serve the browser dashboard from the admin listener's root. Defaults to true."`
	Title     Title          `yaml:"title" doc:"The heading the dashboard shows and the browser tab's name. Defaults to Doppel."`
	Host      Host           `yaml:"host" required:"true" doc:"The IP address the admin listener binds (not a hostname)."`
	Port      Port           `yaml:"port" required:"true" doc:"The TCP port of the admin API. Must differ from server.port."`
	Public    *bool          `yaml:"public" doc:"Serve the whole admin API unauthenticated. Defaults to false; true overrides access and groups."`
	Groups    []AllowedGroup `yaml:"groups" doc:"Which names access lists may use, here and in a proxy's overrides. Defaults to [\"*\"] (any); [] names nobody and is read as public: true. admin and public are always allowed."`
	Auth      Auth           `yaml:"auth" doc:"Which header carries the bearer token."`
	Tokens    []TokenEntry   `yaml:"tokens" doc:"The tokens that may call the admin API. Names and token values are each unique. DOPPEL_ADMIN_TOKENS can supply more."`
	Access    Access         `yaml:"access" doc:"Who may perform each admin action. Every action defaults to the admin group, reads included."`
	Upload    Upload         `yaml:"upload" doc:"Bounds an uploaded template file."`
}

// Auth names the header a caller presents its token in.
type Auth struct {
	Header HeaderName `yaml:"header" doc:"The header carrying Bearer <token>. Defaults to X-Proxy-Authorization."`
}

// DefaultAuthHeader is where tokens are read from unless configured.
const DefaultAuthHeader HeaderName = "X-Proxy-Authorization"

// TokenEntry is one configured admin token.
type TokenEntry struct {
	Name  Name  `yaml:"name" required:"true" doc:"What access lists and logs call this token. Never the secret itself."`
	Group Name  `yaml:"group" required:"true" doc:"The group it belongs to. admin and user are predefined; any other name is a group once a token carries it."`
	Token Token `yaml:"token" required:"true" doc:"The secret the caller sends: printable ASCII without spaces, 32 to 255 characters. A UUID v4 is the recommended shape."`
}

// Access maps each of the six admin actions to who may perform it.
type Access struct {
	List   *Subjects `yaml:"list" doc:"List the proxies. A listing exposes upstream URLs and injected headers."`
	Read   *Subjects `yaml:"read" doc:"Read one proxy document, credentials in its url included."`
	Create *Subjects `yaml:"create" doc:"Add a proxy. May not be public (rule V34) unless admin.public is true."`
	Update *Subjects `yaml:"update" doc:"Replace a proxy, and reload the configuration. May not be public (rule V34) unless admin.public is true."`
	Delete *Subjects `yaml:"delete" doc:"Remove a proxy. May not be public (rule V34) unless admin.public is true."`
	Upload *Subjects `yaml:"upload" doc:"Upload or delete a template file. May not be public (rule V34) unless admin.public is true."`
}

// Upload bounds template uploads.
type Upload struct {
	Limit ByteSize `yaml:"limit" doc:"Largest template file the admin API accepts; larger is 413. Defaults to 1Mi."`
}

// Logging sets the level and format of log lines.
type Logging struct {
	Level  LogLevel  `yaml:"level" doc:"The lowest level logged. Defaults to info; DOPPEL_LOG overrides it when set and not blank."`
	Format LogFormat `yaml:"format" doc:"json for machines, text for a terminal. Defaults to json."`
}

// Control is the control socket.
type Control struct {
	Socket Path `yaml:"socket" doc:"Path of the control socket, created with mode 0600 and removed on shutdown; its parent directory must exist. Defaults to /tmp/doppel.sock."`
}

// Templates locates template files.
type Templates struct {
	Dir Path `yaml:"dir" doc:"Directory holding mock template files, one subdirectory per proxy; created at startup. Defaults to ./templates."`
}

// Sentry configures error reporting.
type Sentry struct {
	DSN string `yaml:"dsn" doc:"The Sentry DSN to report to; empty disables reporting. DOPPEL_SENTRY_DSN overrides it."`
}

// Proxy is one upstream and everything done on the way to it.
type Proxy struct {
	Name             ProxyName                  `yaml:"name" required:"true" doc:"Names this proxy in resolution headers, metrics, logs and as its template subdirectory. Unique."`
	Type             ProxyKind                  `yaml:"type" required:"true" doc:"What it forwards: http (requests, to url), or tcp (connections, from listen to upstream)."`
	URL              *UpstreamURL               `yaml:"url,omitempty" doc:"The upstream base: an absolute http or https URL without query or fragment. A request path is appended under it and can never escape it. Required for http."`
	Listen           *HostPort                  `yaml:"listen,omitempty" doc:"tcp only, and required: the HOST:PORT its listener binds (HOST an IP address)."`
	Upstream         *HostPort                  `yaml:"upstream,omitempty" doc:"tcp only, and required: the HOST:PORT every accepted connection is relayed to."`
	Timeout          Timeout                    `yaml:"timeout,omitempty" doc:"Bounds the whole upstream exchange, in whole seconds; exceeding it is 504 UPSTREAM_TIMEOUT. Defaults to 30. http only."`
	BodyLimit        ByteSize                   `yaml:"body_limit,omitempty" doc:"Bounds what is buffered: a request body a matched mock extracts from, and a response body whose URLs are rewritten. Defaults to 1Mi. http only."`
	Resolve          *Resolve                   `yaml:"resolve,omitempty" doc:"How a request is matched to this proxy: as the default, or by a header naming it. Defaults to {type: default}. http only."`
	Access           *ProxyAccess               `yaml:"access,omitempty" doc:"Overrides admin.access for this proxy alone (read, update, delete, upload only)."`
	Headers          map[HeaderName]HeaderValue `yaml:"headers,omitempty" doc:"Headers injected into every forwarded request, overriding the client's of the same name."`
	Loss             *Loss                      `yaml:"loss,omitempty" doc:"Drops a share of requests with a chosen status. Not applied to a request a mock answered."`
	Latency          *Latency                   `yaml:"latency,omitempty" doc:"Makes a share of requests take a chosen time. Applies to mocked answers too; a mock may override it."`
	Abort            *Abort                     `yaml:"abort,omitempty" doc:"Cuts a share of connections: before forwarding, after the upstream answered, or partway through the body. Not applied to a request a mock answered."`
	Hang             *Hang                      `yaml:"hang,omitempty" doc:"Holds a share of requests unanswered for a time, then closes the connection; the upstream is not contacted. Not applied to a request a mock answered."`
	Bandwidth        *Bandwidth                 `yaml:"bandwidth,omitempty" doc:"Paces a share of answers' bodies to a byte rate. Not applied to a request a mock answered."`
	Replace          *Ratio                     `yaml:"replace,omitempty" doc:"The share of matching requests a mock actually answers; the rest go upstream. Defaults to 1.0. http only."`
	RewriteRedirects *bool                      `yaml:"rewrite_redirects,omitempty" doc:"Point a redirect into this proxy's upstream back at Doppel. Defaults to true. http only."`
	RewriteURLs      *bool                      `yaml:"rewrite_urls,omitempty" doc:"Rewrite the upstream's own address to Doppel's in text bodies. Defaults to true. http only."`
	Mocks            []Mock                     `yaml:"mocks,omitempty" doc:"Mocks in the order they are tried; the first match wins."`
	Receipts         Receipts                   `yaml:"receipts,omitempty" doc:"Put X-Doppel-Fault on every answer, naming the faults that fired (replace, loss, abort, latency): true, or on_request for requests sending X-Doppel-Receipt: 1. Defaults to false."`
}

// Resolve says how requests reach a proxy.
type Resolve struct {
	Type   ResolveKind `yaml:"type" doc:"default takes anything unclaimed; header takes requests naming this proxy in header."`
	Header HeaderName  `yaml:"header,omitempty" doc:"The header carrying the proxy's name. Required when type is header."`
}

// ProxyAccess overrides the four per-proxy actions.
type ProxyAccess struct {
	Read   *Subjects `yaml:"read,omitempty" doc:"Who may read this proxy's document. Absent leaves the global rule."`
	Update *Subjects `yaml:"update,omitempty" doc:"Who may replace this proxy. Absent leaves the global rule."`
	Delete *Subjects `yaml:"delete,omitempty" doc:"Who may remove this proxy. Absent leaves the global rule."`
	Upload *Subjects `yaml:"upload,omitempty" doc:"Who may upload templates for this proxy. Absent leaves the global rule."`
}

// Loss drops a share of requests.
type Loss struct {
	Percentage Ratio                      `yaml:"percentage" required:"true" doc:"The share of requests to drop, as a fraction: 0.1 is one in ten."`
	Status     Status                     `yaml:"status" required:"true" doc:"The status a dropped request is answered with."`
	RetryAfter *RetryAfter                `yaml:"retry_after,omitempty" doc:"Sent as Retry-After on the dropped request's answer: whole seconds, 0 to 86400."`
	GRPCStatus *GRPCStatus                `yaml:"grpc_status,omitempty" doc:"A gRPC request (Content-Type application/grpc...) is dropped as gRPC fails: HTTP 200 with this grpc-status (0 to 16, such as 14 UNAVAILABLE) and a grpc-message, which a gRPC client retries by its service config. Other requests get status."`
	Headers    map[HeaderName]HeaderValue `yaml:"headers,omitempty" doc:"Headers added to the dropped request's answer."`
	When       *When                      `yaml:"when,omitempty" doc:"Narrows the requests it may fire on: headers, a count per key, a window of time. The percentage applies to those it admits."`
}

// Latency delays a share of requests.
type Latency struct {
	Percentage Ratio    `yaml:"percentage" required:"true" doc:"The share of requests to delay, as a fraction."`
	Min        Seconds  `yaml:"min" required:"true" doc:"Lower bound of the delay in seconds. The delay is a target for the whole response: time already spent is subtracted."`
	Max        Seconds  `yaml:"max" required:"true" doc:"Upper bound of the delay in seconds. Must be at least min."`
	Jitter     *Seconds `yaml:"jitter,omitempty" doc:"tcp only: on top of the connection's delay (drawn once, before its first byte), each chunk relayed waits a draw up to this many seconds."`
	When       *When    `yaml:"when,omitempty" doc:"Narrows the requests it may fire on: headers, a count per key, a window of time. The percentage applies to those it admits."`
}

// Mock answers a matching request itself.
type Mock struct {
	Name     Name          `yaml:"name" required:"true" doc:"Names this mock in the mock log field and the hit counter. Unique within the proxy."`
	Request  MockRequest   `yaml:"request" required:"true" doc:"What this mock matches, and what it takes out of the request."`
	Response MockResponse  `yaml:"response" required:"true" doc:"What it answers with."`
	Proxy    *MockOverride `yaml:"proxy,omitempty" doc:"Per-mock overrides of the proxy's replace and faults: loss, latency, abort, hang, bandwidth."`
}

// MockRequest matches requests and extracts variables from them.
type MockRequest struct {
	Method  Method                `yaml:"method" required:"true" doc:"The method this mock answers, matched exactly."`
	URL     Pattern               `yaml:"url" required:"true" doc:"A regular expression matched against the request path, unanchored. Named capture groups become template variables."`
	Headers map[string]HeaderName `yaml:"headers,omitempty" doc:"Variable name -> request header name."`
	Query   map[string]Selector   `yaml:"query,omitempty" doc:"Variable name -> selector over the query string, such as .filter."`
	Body    map[string]Selector   `yaml:"body,omitempty" doc:"Variable name -> selector over the JSON request body, such as .content.items. Makes the body buffered, up to body_limit."`
}

// MockResponse is what a mock answers with.
type MockResponse struct {
	Status   Status                  `yaml:"status" required:"true" doc:"The status to answer with."`
	Body     *Template               `yaml:"body,omitempty" doc:"A template rendered and sent as text/plain. Exclusive with json and template."`
	JSON     *Template               `yaml:"json,omitempty" doc:"A template whose output must be valid JSON, sent as application/json exactly as rendered. Exclusive with body and template."`
	Template *TemplateName           `yaml:"template,omitempty" doc:"A template file under this proxy's template directory, read per request. Exclusive with body and json."`
	Headers  map[HeaderName]Template `yaml:"headers,omitempty" doc:"Header name -> template producing the value."`
}

// MockOverride carries a mock's own fault settings.
type MockOverride struct {
	Replace   *Ratio     `yaml:"replace,omitempty" doc:"Overrides the proxy's replace for requests this mock matches."`
	Loss      *Loss      `yaml:"loss,omitempty" doc:"Drops a share of the requests this mock would answer. Never inherited from the proxy."`
	Latency   *Latency   `yaml:"latency,omitempty" doc:"Replaces the proxy's latency for this mock's answers, rather than adding to it."`
	Abort     *Abort     `yaml:"abort,omitempty" doc:"Cuts a share of this mock's connections (at: request or body; response acts as request). Never inherited from the proxy."`
	Hang      *Hang      `yaml:"hang,omitempty" doc:"Holds a share of the requests this mock would answer unanswered, then closes. Never inherited from the proxy."`
	Bandwidth *Bandwidth `yaml:"bandwidth,omitempty" doc:"Paces a share of this mock's bodies. Never inherited from the proxy."`
}

// Faults are the fault settings of a proxy or of a mock's proxy block,
// side by side: what internal/fault builds faults from. A new fault adds
// its field here and to Proxy and MockOverride.
type Faults struct {
	Loss      *Loss
	Latency   *Latency
	Abort     *Abort
	Hang      *Hang
	Bandwidth *Bandwidth
}

// ResolveType is how requests reach the proxy: "" for a tcp proxy,
// which no request reaches.
func (p *Proxy) ResolveType() ResolveKind {
	if p.Resolve == nil {
		return ""
	}
	return p.Resolve.Type
}

// Faults are the proxy's own fault settings.
func (p *Proxy) Faults() Faults {
	return Faults{Loss: p.Loss, Latency: p.Latency, Abort: p.Abort, Hang: p.Hang, Bandwidth: p.Bandwidth}
}

// setFaults makes f the proxy's fault settings.
func (p *Proxy) setFaults(f Faults) {
	p.Loss, p.Latency, p.Abort, p.Hang, p.Bandwidth = f.Loss, f.Latency, f.Abort, f.Hang, f.Bandwidth
}

// over is f with base's settings for the kinds f does not declare.
func (f Faults) over(base Faults) Faults {
	f.Loss = cmp.Or(f.Loss, base.Loss)
	f.Latency = cmp.Or(f.Latency, base.Latency)
	f.Abort = cmp.Or(f.Abort, base.Abort)
	f.Hang = cmp.Or(f.Hang, base.Hang)
	f.Bandwidth = cmp.Or(f.Bandwidth, base.Bandwidth)
	return f
}

// Faults are the mock's own fault settings.
func (o *MockOverride) Faults() Faults {
	return Faults{Loss: o.Loss, Latency: o.Latency, Abort: o.Abort, Hang: o.Hang, Bandwidth: o.Bandwidth}
}

// Defaults for the sections that may be left out.
const (
	DefaultLogLevel  LogLevel  = "info"
	DefaultLogFormat LogFormat = "json"
	DefaultSocket    Path      = "/tmp/doppel.sock"
	DefaultTemplates Path      = "./templates"
)

// Normalize fills in every default, so that the canonical form is explicit
// and readers never meet a nil setting. It is idempotent.
func (d *Document) Normalize() {
	a := &d.Admin
	setBool(&a.Enable, true)
	setBool(&a.Dashboard, true)
	setBool(&a.Public, false)
	if a.Title == "" {
		a.Title = DefaultTitle
	}
	if a.Groups == nil {
		a.Groups = []AllowedGroup{AnyGroup}
	}
	if a.Auth.Header == "" {
		a.Auth.Header = DefaultAuthHeader
	}
	if a.Tokens == nil {
		a.Tokens = []TokenEntry{}
	}
	for _, s := range []**Subjects{&a.Access.List, &a.Access.Read, &a.Access.Create, &a.Access.Update, &a.Access.Delete, &a.Access.Upload} {
		if *s == nil {
			def := AdminSubjects()
			*s = &def
		}
	}
	if a.Upload.Limit == 0 {
		a.Upload.Limit = DefaultByteSize
	}
	if d.Proxies == nil {
		d.Proxies = []Proxy{}
	}
	for i := range d.Proxies {
		d.Proxies[i].Normalize()
	}
	if d.Logging.Level == "" {
		d.Logging.Level = DefaultLogLevel
	}
	if d.Logging.Format == "" {
		d.Logging.Format = DefaultLogFormat
	}
	if d.Control.Socket == "" {
		d.Control.Socket = DefaultSocket
	}
	if d.Templates.Dir == "" {
		d.Templates.Dir = DefaultTemplates
	}
	if d.Sentry != nil && d.Sentry.DSN == "" {
		d.Sentry = nil
	}
	if d.Journal == nil {
		d.Journal = &Journal{}
	}
	d.Journal.normalize()
}

// Normalize fills in a proxy's defaults; a tcp proxy has none of an
// http one's.
func (p *Proxy) Normalize() {
	if p.Type == KindTCP {
		p.normalizeCommon()
		return
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultTimeout
	}
	if p.BodyLimit == 0 {
		p.BodyLimit = DefaultByteSize
	}
	if p.Resolve == nil {
		p.Resolve = &Resolve{}
	}
	if p.Resolve.Type == "" {
		p.Resolve.Type = ResolveDefault
	}
	if p.Replace == nil {
		one := Ratio(1)
		p.Replace = &one
	}
	setBool(&p.RewriteRedirects, true)
	setBool(&p.RewriteURLs, true)
	p.normalizeCommon()
}

func (p *Proxy) normalizeCommon() {
	if p.Access != nil && *p.Access == (ProxyAccess{}) {
		p.Access = nil
	}
	if len(p.Headers) == 0 {
		p.Headers = nil
	}
	if len(p.Mocks) == 0 {
		p.Mocks = nil
	}
	for i := range p.Mocks {
		m := &p.Mocks[i]
		if m.Proxy != nil && *m.Proxy == (MockOverride{}) {
			m.Proxy = nil
		}
	}
}

func setBool(p **bool, def bool) {
	if *p == nil {
		*p = &def
	}
}

// IsPublic reports whether every admin action is public: admin.public, or
// admin.groups written as [] (which names nobody).
func (a *Admin) IsPublic() bool {
	return (a.Public != nil && *a.Public) || (a.Groups != nil && len(a.Groups) == 0)
}

// Actions lists the six admin actions with their settings, in a fixed order.
func (a *Access) Actions() []Action {
	return []Action{
		{"list", a.List}, {"read", a.Read}, {"create", a.Create},
		{"update", a.Update}, {"delete", a.Delete}, {"upload", a.Upload},
	}
}

// Actions lists the four overridable actions, absent ones included as nil.
func (a *ProxyAccess) Actions() []Action {
	return []Action{{"read", a.Read}, {"update", a.Update}, {"delete", a.Delete}, {"upload", a.Upload}}
}

// An Action is one admin action's name and who may perform it.
type Action struct {
	Name     string
	Subjects *Subjects
}

// IsWrite reports the actions V34 keeps from being public.
func (a Action) IsWrite() bool {
	switch a.Name {
	case "create", "update", "delete", "upload":
		return true
	}
	return false
}

// A Declared is a variable a mock extracts from headers, query or body.
type Declared struct {
	Source string // headers, query or body: its key under request
	Name   string
}

// Declared lists the variables the request extracts, source by source and
// by name, in a fixed order.
func (r *MockRequest) Declared() []Declared {
	var out []Declared
	for _, src := range []struct {
		key   string
		names []string
	}{
		{"headers", slices.Sorted(maps.Keys(r.Headers))},
		{"query", slices.Sorted(maps.Keys(r.Query))},
		{"body", slices.Sorted(maps.Keys(r.Body))},
	} {
		for _, n := range src.names {
			out = append(out, Declared{Source: src.key, Name: n})
		}
	}
	return out
}

// Proxy is the proxy of that name, or nil: the one lookup by name, for the
// document in force and for one being edited alike.
func (d *Document) Proxy(name string) *Proxy {
	for i := range d.Proxies {
		if string(d.Proxies[i].Name) == name {
			return &d.Proxies[i]
		}
	}
	return nil
}

// Declares reports whether some mock of the proxy names the template file
// in response.template.
func (p *Proxy) Declares(file string) bool {
	for _, m := range p.Mocks {
		if m.Response.Template != nil && string(*m.Response.Template) == file {
			return true
		}
	}
	return false
}
