// Package admin is the admin listener: the API under /api/ that changes a
// running Doppel (proxies, template files, reload) and reports on it
// (status, access, schema). Every answer that is an error is the envelope
// of internal/apierr; access is decided by the configuration in force.
package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/change"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/fleet"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/doppelproxy/doppel/internal/session"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

// Server serves the admin API.
type Server struct {
	// Seeded is reported by /api/v1/status: whether fault rolls are
	// reproducible (serve --seed). The seed itself is not shown.
	Seeded bool
	// Metrics serves GET /metrics; 404 when nil.
	Metrics http.Handler
	// Sessions are the live sessions the session endpoints write; a
	// registry of the API's own when left nil.
	Sessions *session.Registry
	// TCPCounters are a running tcp proxy's when counts by name (nil when
	// none runs of that name), for the counters endpoints.
	TCPCounters func(name string) *fault.Counters
	// TCPListen reports why a tcp proxy could not listen on an address
	// (nil when it can), so that a write naming one in use is refused
	// rather than stored and not in force.
	TCPListen func(addr string) error
	// Fleet is this replica and its peers (SPEC §18.1); an instance of its
	// own unless JoinFleet says otherwise.
	Fleet *fleet.Member
	// fleetKey signs the calls to peers, verifier checks theirs; nil
	// without a fleet key.
	fleetKey fleet.Key
	verifier *fleet.Verifier

	ctl     *change.Controller
	journal *journal.Journal
	streams *streams // the journal's open streams
	env     []Token
	log     *telemetry.Logger
	started time.Time
	handler http.Handler

	// dashboard and title are admin.dashboard and admin.title at start:
	// listener settings, which a reload does not change (SPEC §9.8).
	dashboard bool
	title     string
}

// New builds the admin API over the controller; env are the tokens of
// DOPPEL_ADMIN_TOKENS, j the request journal (nil: none is kept).
func New(ctl *change.Controller, env []Token, log *telemetry.Logger, j *journal.Journal) *Server {
	if log == nil {
		log = telemetry.Nop()
	}
	s := &Server{ctl: ctl, journal: j, env: env, log: log, started: time.Now(), streams: newStreams()}
	s.Sessions = session.New(ctl.Runtime(), log.Logger)
	a := ctl.Runtime().Document.Admin
	s.dashboard = a.Dashboard == nil || *a.Dashboard
	s.title = string(a.Title)
	if s.title == "" {
		s.title = string(config.DefaultTitle)
	}
	s.Fleet = fleet.Single(fleet.This("", string(ctl.Runtime().Revision)))
	s.handler = s.routes()
	return s
}

// JoinFleet makes m the fleet the API answers for, key the fleet key its
// peers sign with (nil: none).
func (s *Server) JoinFleet(m *fleet.Member, key fleet.Key) {
	s.Fleet, s.fleetKey = m, key
	if key != nil {
		s.verifier = fleet.NewVerifier(key, m.Self().ID, m.Self().URL)
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if fleet.Signed(r) {
		r, ok := s.verifyPeer(w, r)
		if !ok {
			return
		}
		r = withoutTrailingSlash(r)
		if r.URL.Path == "/api/v1/requests/stream" {
			s.handler.ServeHTTP(newFramedAnswer(w, r, s.fleetKey), r)
			return
		}
		answer := &signedAnswer{header: http.Header{}}
		s.handler.ServeHTTP(answer, r)
		answer.send(w, r, s.fleetKey)
		return
	}
	s.handler.ServeHTTP(w, withoutTrailingSlash(r))
}

// withoutTrailingSlash is how a trailing slash is accepted on every path:
// the request is routed as if it had none. The escaped form of the path is
// trimmed too, so an encoded segment (a%2Fb) stays what it was.
func withoutTrailingSlash(r *http.Request) *http.Request {
	p := r.URL.Path
	if len(p) <= 1 || !strings.HasSuffix(p, "/") {
		return r
	}
	r2 := *r
	u := *r.URL
	u.Path = strings.TrimRight(p, "/")
	if u.RawPath != "" {
		u.RawPath = strings.TrimRight(u.RawPath, "/")
	}
	r2.URL = &u
	return &r2
}

// route is one endpoint: what serves it and what the OpenAPI document says
// of it. The table below is the only list of endpoints: the mux and
// GET /openapi.json are both built from it, so nothing is served
// undocumented and nothing documented is missing.
type route struct {
	method, pattern string
	handle          http.HandlerFunc
	api             api
}

// routeTable lists the endpoints in the order the document shows them.
// A pattern is written as documented; a trailing slash on it is dropped
// when it is routed, since ServeHTTP drops the request's.
func (s *Server) routeTable() []route {
	upload := func(operationID string) api {
		return api{operationID: operationID, tag: tagTemplates, summary: "Upload a template file", action: ActUpload, body: rawBody,
			about: "The body is the file, raw. Checked in this order, before the body is read: the file name is safe; " +
				"some mock of that proxy names it in `response.template` (else 422); the body fits `admin.upload.limit` (else 413).",
			ok:    []reply{{status: 204, means: "stored; the next request of a mock naming it uses it"}},
			codes: []apierr.Code{apierr.ConfigInvalid, apierr.NotFound, apierr.TemplateNotDeclared, apierr.UploadTooLarge, apierr.StoreError},
		}
	}
	return append([]route{
		{"GET", "/api/v1/proxies", s.listProxies, api{operationID: "listProxies",
			tag: tagProxies, summary: "List the proxies in force", action: ActList,
			about: "Only the proxies the caller may also `read` are listed: a proxy's document carries what it injects.",
			ok:    []reply{{status: 200, means: "every proxy the caller may read, in the order they are tried, each with its revision", schema: "ProxyList"}},
			codes: []apierr.Code{apierr.StoreError},
		}},
		{"POST", "/api/v1/proxies", s.createProxy, api{operationID: "createProxy",
			tag: tagProxies, summary: "Create a proxy", action: ActCreate, body: proxyCreateBody,
			about: "In force when it answers. A revision in the body or an `If-Match` header is refused: a new proxy has none.",
			ok:    []reply{{status: 201, means: "created and in force", schema: "ProxyRevision", headers: []string{"Location", "ETag"}}},
			codes: []apierr.Code{apierr.ConfigInvalid, apierr.Conflict, apierr.UploadTooLarge, apierr.StoreError},
		}},
		{"GET", "/api/v1/proxies/{name}", s.readProxy, api{operationID: "readProxy",
			tag: tagProxies, summary: "Read a proxy", action: ActRead,
			ok:    []reply{{status: 200, means: "the proxy in canonical form, every default explicit", schema: "ProxyRevision", headers: []string{"ETag"}}},
			codes: []apierr.Code{apierr.NotFound, apierr.StoreError},
		}},
		{"PUT", "/api/v1/proxies/{name}", s.updateProxy, api{operationID: "updateProxy",
			tag: tagProxies, summary: "Update (or rename) a proxy", action: ActUpdate, headers: []string{"If-Match"}, body: proxyUpdateBody,
			about: "Carries the revision it is based on, in `If-Match` or the body. A document naming another proxy renames it and moves its template files. " +
				"Template files no remaining mock names are removed. In force when it answers.",
			ok: []reply{{status: 200, means: "updated and in force; the new revision", schema: "ProxyRevision", headers: []string{"ETag"}}},
			codes: []apierr.Code{apierr.ConfigInvalid, apierr.NotFound, apierr.RevisionMismatch, apierr.Conflict,
				apierr.UploadTooLarge, apierr.RevisionRequired, apierr.StoreError},
		}},
		{"DELETE", "/api/v1/proxies/{name}", s.deleteProxy, api{operationID: "deleteProxy",
			tag: tagProxies, summary: "Delete a proxy and its template files", action: ActDelete, headers: []string{"If-Match"},
			about: "`If-Match` is checked when given and not required.",
			ok:    []reply{{status: 204, means: "deleted; no longer in force"}},
			codes: []apierr.Code{apierr.ConfigInvalid, apierr.NotFound, apierr.RevisionMismatch, apierr.Conflict, apierr.StoreError},
		}},
		{"GET", "/api/v1/proxies/{name}/templates", s.listTemplates, api{operationID: "listTemplates",
			tag: tagTemplates, summary: "List a proxy's template files", action: ActRead,
			ok:    []reply{{status: 200, means: "the files, `[]` when none", schema: "TemplateList"}},
			codes: []apierr.Code{apierr.NotFound, apierr.StoreError},
		}},
		{"GET", "/api/v1/proxies/{name}/counters", s.listCounters, api{operationID: "listCounters",
			tag: tagProxies, summary: "List a proxy's fault counters", action: ActRead, query: []string{"session"},
			about: "The counts its faults' `when` conditions keep, per mock, fault and key (the `per` header's value or the client IP; `\"\"` " +
				"when proxy-wide or the header is missing), oldest first. They restart when the proxy's revision changes. With `session`, those of that session's overlay of the proxy.",
			ok:    []reply{{status: 200, means: "the counters, `[]` when none", schema: "CounterList"}},
			codes: []apierr.Code{apierr.NotFound},
		}},
		{"DELETE", "/api/v1/proxies/{name}/counters", s.resetCounters, api{operationID: "resetCounters",
			tag: tagProxies, summary: "Reset a proxy's fault counters", action: ActUpdate, query: []string{"session"},
			about: "Every count starts again, and so do the attempts `--seed` counts per request id.",
			ok:    []reply{{status: 204, means: "reset"}},
			codes: []apierr.Code{apierr.NotFound},
		}},
		{"POST", "/api/v1/proxies/{name}/record", s.recordProxy, api{operationID: "recordProxy",
			tag: tagProxies, summary: "Record mocks from the journal's exchanges", action: ActRead, body: recordBodyKind,
			about: "Turns the journal's forwarded exchanges of the proxy (its own answers, not a mock's or a fault's; `match` a path regex, " +
				"`session`, `since` as the journal's filter) into mocks, one per method and path, the latest answer winning: its status, its " +
				"end-to-end headers (not `Date`, `Content-Length`, hop-by-hop, nor a secret the journal masks), its body as `json` when it parses, " +
				"else `body`, written so that the template renders it byte for byte, and a `latency` from the upstream times seen. " +
				"Needs `journal.bodies` > 0. With `apply: false` (needs `read`) it shows them; with `apply: true` (needs `update`) it appends " +
				"them through the compare-and-swap of an update: `revision` is required.",
			ok: []reply{{status: 200, means: "apply false, or nothing matched: the mocks (`[]` and a message when none); apply true: the updated proxy and its new revision", schema: "RecordResult"}},
			codes: []apierr.Code{apierr.ConfigInvalid, apierr.NotFound, apierr.RevisionMismatch, apierr.RevisionRequired,
				apierr.UploadTooLarge, apierr.StoreError},
		}},
		{"POST", "/api/v1/proxies/{name}/templates/{file}", s.uploadTemplate, upload("uploadTemplatePost")},
		{"PUT", "/api/v1/proxies/{name}/templates/{file}", s.uploadTemplate, upload("uploadTemplatePut")},
		{"DELETE", "/api/v1/proxies/{name}/templates/{file}", s.deleteTemplate, api{operationID: "deleteTemplate",
			tag: tagTemplates, summary: "Delete a template file", action: ActUpload,
			ok:    []reply{{status: 204, means: "deleted"}},
			codes: []apierr.Code{apierr.ConfigInvalid, apierr.NotFound, apierr.StoreError},
		}},
		{"GET", "/api/v1/sessions", s.listSessions, api{operationID: "listSessions",
			tag: tagSessions, summary: "List the live sessions", action: ActList,
			about: "Those whose every proxy the caller may read, soonest to expire first.",
			ok:    []reply{{status: 200, means: "the sessions, `[]` when none", schema: "SessionList"}},
		}},
		{"POST", "/api/v1/sessions", s.createSession, api{operationID: "createSession",
			tag: tagSessions, summary: "Create a session", action: ActUpdate, body: sessionBodyKind,
			about: "An overlay of mocks and faults on some proxies, in force only for requests carrying its id in the session header " +
				"(`server.session_header`, default `X-Doppel-Session`). Needs `update` on every proxy it names, decided before anything else; " +
				"a proxy that does not exist is then `400` at `proxies.<name>`. At most 1,000 live; ends by itself after `ttl` seconds.",
			ok:    []reply{{status: 201, means: "in force", schema: "SessionInfo", headers: []string{"Location", "ETag"}}},
			codes: []apierr.Code{apierr.ConfigInvalid, apierr.Conflict, apierr.UploadTooLarge, apierr.StoreError},
		}},
		{"GET", "/api/v1/sessions/{id}", s.readSession, api{operationID: "readSession",
			tag: tagSessions, summary: "Read a session", action: ActRead,
			about: "With what it lays over each proxy, as written. Needs `read` on every proxy it names.",
			ok:    []reply{{status: 200, means: "the session", schema: "SessionRead", headers: []string{"ETag"}}},
			codes: []apierr.Code{apierr.NotFound},
		}},
		{"PUT", "/api/v1/sessions/{id}", s.updateSession, api{operationID: "updateSession",
			tag: tagSessions, summary: "Update a session", action: ActUpdate, headers: []string{"If-Match"}, body: sessionBodyKind,
			about: "Replaces what it lays over the proxies, compare-and-swap on its revision (the body's or `If-Match`; neither is `428`); its ttl counts again from now.",
			ok:    []reply{{status: 200, means: "updated and in force", schema: "SessionInfo", headers: []string{"ETag"}}},
			codes: []apierr.Code{apierr.ConfigInvalid, apierr.NotFound, apierr.RevisionMismatch, apierr.RevisionRequired, apierr.UploadTooLarge, apierr.StoreError},
		}},
		{"DELETE", "/api/v1/sessions/{id}", s.deleteSession, api{operationID: "deleteSession",
			tag: tagSessions, summary: "End a session", action: ActUpdate,
			ok:    []reply{{status: 204, means: "ended"}},
			codes: []apierr.Code{apierr.NotFound, apierr.StoreError},
		}},
		{"POST", "/api/v1/config/reload", s.reload, api{operationID: "reload",
			tag: tagConfig, summary: "Reload the stored configuration", action: ActUpdate,
			about: "Loads, checks and compiles the whole stored configuration and swaps it in; a failure leaves the running one untouched.",
			ok:    []reply{{status: 200, means: "in force; `unapplied` lists the sections that need a restart", schema: "ReloadResult"}},
			codes: []apierr.Code{apierr.ConfigInvalid, apierr.StoreError},
		}},
		{"GET", "/api/v1/access", s.access, api{operationID: "access",
			tag: tagConfig, summary: "What the caller may do",
			about: "Decided by the same function as every endpoint; `proxies` is absent for a caller who may not list.",
			ok:    []reply{{status: 200, means: "the caller and its rights", schema: "AccessReport"}},
		}},
		{"GET", "/api/v1/schema", s.schema, api{operationID: "schema",
			tag: tagConfig, summary: "The configuration's JSON Schema",
			ok: []reply{{status: 200, means: "the JSON Schema (2020-12) of the configuration document", media: []string{"application/schema+json"}, schema: schemaObject}},
		}},
		{"GET", "/api/v1/status", s.status, api{operationID: "status",
			tag: tagConfig, summary: "Uptime, revision and proxies in force",
			ok: []reply{{status: 200, means: "upstreams without their credentials", schema: "StatusReport"}},
		}},
		{"GET", "/api/v1/replicas", s.replicas, api{operationID: "listReplicas",
			tag: tagConfig, summary: "The replicas serving this configuration",
			about: "With the PostgreSQL store, every replica serving the configuration name, as the registry holds them: " +
				"live first, oldest start first; a replica without a heartbeat for 10 s is `lost`, and reported for 5 minutes. " +
				"An instance with the file store lists itself.",
			ok:    []reply{{status: 200, means: "the fleet", schema: "ReplicaList"}},
			codes: []apierr.Code{apierr.StoreError},
		}},
		{"GET", "/api/v1/requests", s.listRequests, api{operationID: "listRequests",
			tag: tagJournal, summary: "The journal's requests", action: ActRead, query: append(slices.Clone(filterQuery), "local"),
			about: "The requests the proxy listener handled, oldest first, of the proxies the caller may `read`; " +
				"a caller who may read none is refused. `dropped` counts the entries the ring forgot since start to make room.",
			ok:    []reply{{status: 200, means: "the entries that pass the filters", schema: "RequestList"}},
			codes: []apierr.Code{apierr.ConfigInvalid},
		}},
		{"DELETE", "/api/v1/requests", s.clearRequests, api{operationID: "clearRequests",
			tag: tagJournal, summary: "Clear the journal", action: ActUpdate, query: []string{"proxy", "local"},
			about: "Forgets the entries of each proxy named (`update` on each), or of every proxy the caller may update.",
			ok:    []reply{{status: 204, means: "cleared, on every live replica with the PostgreSQL store unless `local=true`"}},
			codes: []apierr.Code{apierr.ConfigInvalid, apierr.ReplicaUnavailable},
		}},
		{"GET", "/api/v1/requests/stream", s.streamRequests, api{operationID: "streamRequests",
			tag: tagJournal, summary: "New requests as Server-Sent Events", action: ActRead, query: append(slices.Clone(filterQuery), "local"),
			about: "Each new entry that passes the filters is an event `request` whose data is the entry and whose id is its place in the order of recording. " +
				"With `since` or `limit` the stream begins with the kept entries they select, as the list would show them, then follows; " +
				"a reconnecting EventSource's `Last-Event-ID` resumes after that entry when it is still kept. A subscriber never slows the proxy: " +
				"one that leaves more than 1,000 entries unread loses the oldest, and is told by an event `dropped` with data `{\"dropped\": n}` before the entries that follow. " +
				"At most 16 streams per caller and 256 in all. " +
				"With the PostgreSQL store the stream follows every live replica unless `local=true`: its first event `replicas` says which it follows and which are missing " +
				"(`{\"answered\": [ids], \"missing\": [...]}`, again whenever that changes), each entry says its `replica`, `dropped` says whose, " +
				"and each id is a cursor of every replica's position (`<replica>:<n>,…,@<ms>`) that `Last-Event-ID` resumes on any replica.",
			ok:    []reply{{status: 200, means: "the stream, until the client leaves", media: []string{"text/event-stream"}, schema: schemaText}},
			codes: []apierr.Code{apierr.ConfigInvalid, apierr.TooManySubscribers},
		}},
		{"POST", "/api/v1/requests/verify", s.verifyRequests, api{operationID: "verifyRequests",
			tag: tagJournal, summary: "Verify what a client did", action: ActRead, body: verifyBody,
			about: "Selects the entries `match` names among those the caller may read and checks `count`, the gaps between consecutive ones " +
				"(`gaps_ms`: a backoff) and that all carry one value of `same_header` (a retry kept its key). At most 64 KiB.",
			ok: []reply{
				{status: 200, means: "every condition holds", schema: "VerifyResult"},
				// The envelope with what was found: a failed verification is
				// an answer a test reads, not only an error.
				{status: 409, means: "`VERIFICATION_FAILED`: " + codeMeaning[apierr.VerificationFailed] + ".", schema: "VerifyFailure"},
			},
			codes: []apierr.Code{apierr.ConfigInvalid, apierr.UploadTooLarge, apierr.ReplicaUnavailable},
		}},
		{"GET", "/metrics", s.metrics, api{operationID: "metrics",
			tag: tagDocs, summary: "Prometheus metrics",
			about: "The Prometheus text format, without a token: a scraper has nowhere to put one. No series has a path label.",
			ok:    []reply{{status: 200, means: "the metrics", media: []string{"text/plain"}, schema: schemaText}},
		}},
		{"GET", "/openapi.json", s.openAPI, api{operationID: "openAPI",
			tag: tagDocs, summary: "This document",
			ok: []reply{
				{status: 200, means: "the OpenAPI 3.1 document, generated from the routes served", schema: schemaObject, headers: []string{"ETag"}},
				{status: 304, means: "unchanged since the `ETag` in `If-None-Match`"},
			},
		}},
		{"GET", "/swagger-ui/", s.swaggerUI, api{operationID: "swaggerUI",
			tag: tagDocs, summary: "Swagger UI over this document",
			ok: []reply{
				{status: 200, means: "the page; its assets are compiled into the binary", media: []string{"text/html"}, schema: schemaText, headers: []string{"ETag"}},
				{status: 301, means: "asked without the trailing slash: go to `/swagger-ui/`", headers: []string{"Location"}},
				{status: 304, means: "unchanged since the `ETag` in `If-None-Match`"},
			},
		}},
		{"GET", "/swagger-ui/{asset}", s.swaggerAsset, api{operationID: "swaggerAsset",
			tag: tagDocs, summary: "A Swagger UI asset",
			ok: []reply{
				{status: 200, means: "the file", media: swaggerAssets().mediaTypes(""), schema: schemaText, headers: []string{"ETag"}},
				{status: 304, means: "unchanged since the `ETag` in `If-None-Match`"},
			},
			codes: []apierr.Code{apierr.NotFound},
		}},
	}, s.dashboardRoutes()...)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	allow := map[string][]string{}
	var patterns []string
	var page http.HandlerFunc
	for _, rt := range s.routeTable() {
		p := routed(rt.pattern)
		if p == "/" {
			page = rt.handle // the dashboard: the fallback below serves it
			continue
		}
		mux.HandleFunc(rt.method+" "+p, rt.handle)
		if _, seen := allow[p]; !seen {
			patterns = append(patterns, p)
		}
		allow[p] = append(allow[p], rt.method)
	}
	for _, p := range patterns {
		methods := allow[p]
		if slices.Contains(methods, "GET") {
			methods = append(methods, "HEAD")
		}
		header := strings.Join(methods, ", ")
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", header)
			apierr.Write(w, apierr.MethodNotAllowed, r.Method+" is not allowed here; allowed: "+header)
		})
	}
	// Whatever no route took. With the dashboard, every other GET is the
	// page (a client route, reloaded; the page itself refuses /api/ and
	// /static/). Another method is never answered with the page: the root
	// is a known path (405), anything else is not (404).
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case page != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			page(w, r)
		case page != nil && r.URL.Path == "/":
			w.Header().Set("Allow", "GET, HEAD")
			apierr.Write(w, apierr.MethodNotAllowed, r.Method+" is not allowed here; allowed: GET, HEAD")
		default:
			apierr.Write(w, apierr.NotFound, "no such path: "+r.URL.Path)
		}
	})
	return mux
}

// routed is the pattern the mux matches: ServeHTTP has already dropped
// the request's trailing slash.
func routed(pattern string) string {
	if len(pattern) > 1 {
		return strings.TrimSuffix(pattern, "/")
	}
	return pattern
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.Metrics == nil {
		apierr.Write(w, apierr.NotFound, "no metrics are served here")
		return
	}
	s.Metrics.ServeHTTP(w, r)
}

// policy is the configuration in force and who is calling: access is
// always decided by the configuration running now, never by what the store
// holds, so a token written into the store out of band has no effect until
// a reload puts it in force.
func (s *Server) policy(r *http.Request) (*config.Document, Caller) {
	doc := s.ctl.Runtime().Document
	if c, ok := s.peerCaller(r, doc); ok {
		return doc, c
	}
	return doc, identify(r, doc, s.env)
}

// authorize answers 401 or 403 and returns false when the caller may not
// act; it runs before anything about the target is looked up, so a caller
// without the right learns nothing about what exists.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, act Action, proxy *config.Proxy) bool {
	doc, c := s.policy(r)
	if allowed(doc, c, act, proxy) {
		return true
	}
	s.refuse(w, doc, c, act)
	return false
}

// refuse answers 401 to an anonymous caller, 403 to a token.
func (s *Server) refuse(w http.ResponseWriter, doc *config.Document, c Caller, act Action) {
	if c.Anonymous {
		apierr.Write(w, apierr.Unauthorized, c.unauthorized(doc))
		return
	}
	apierr.Write(w, apierr.Forbidden, "token "+string(c.Name)+" may not "+string(act)+" here")
}

// inForce returns the proxy of that name in the configuration in force.
func (s *Server) inForce(name string) *config.Proxy {
	return s.ctl.Runtime().Document.Proxy(name)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		apierr.Write(w, apierr.StoreError, "cannot encode the answer: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeFailure maps what a change returned to the envelope.
func (s *Server) writeFailure(w http.ResponseWriter, err error) {
	var (
		inv      *config.Invalid
		conflict *change.Conflict
		mismatch *revisionMismatch
		notFound *notFound
		np       *change.NotPromoted
	)
	switch {
	case errors.As(err, &inv):
		apierr.Write(w, apierr.ConfigInvalid, strings.Join(inv.Lines(), "\n"))
	case errors.As(err, &mismatch):
		apierr.Write(w, apierr.RevisionMismatch, mismatch.Error())
	case errors.As(err, &conflict):
		apierr.Write(w, apierr.Conflict, conflict.Error())
	case errors.As(err, &notFound):
		apierr.Write(w, apierr.NotFound, notFound.Error())
	case errors.As(err, &np):
		s.log.Error("a write was stored but not promoted", "error", np.Err.Error())
		apierr.Write(w, apierr.StoreError, np.Error())
	default:
		s.log.Error("admin write failed", "error", err.Error())
		apierr.Write(w, apierr.StoreError, "the store failed: "+err.Error())
	}
}

type revisionMismatch struct{ name, current string }

func (e *revisionMismatch) Error() string {
	return "proxy " + e.name + " changed since it was read (its revision is now " + e.current + "); read it again and reapply the change"
}

type notFound struct{ what string }

func (e *notFound) Error() string { return e.what + " does not exist" }
