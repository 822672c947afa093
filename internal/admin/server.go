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
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

// Server serves the admin API.
type Server struct {
	ctl     *runtime.Controller
	env     []Token
	log     *telemetry.Logger
	started time.Time
	handler http.Handler
}

// New builds the admin API over the controller; env are the tokens of
// DOPPEL_ADMIN_TOKENS.
func New(ctl *runtime.Controller, env []Token, log *telemetry.Logger) *Server {
	if log == nil {
		log = telemetry.Nop()
	}
	s := &Server{ctl: ctl, env: env, log: log, started: time.Now()}
	s.handler = s.routes()
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A trailing slash is accepted on every path.
	if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
		r2 := *r
		u := *r.URL
		u.Path = strings.TrimRight(p, "/")
		u.RawPath = ""
		r2.URL = &u
		r = &r2
	}
	s.handler.ServeHTTP(w, r)
}

// route is one endpoint.
type route struct {
	method, pattern string
	handle          http.HandlerFunc
}

func (s *Server) routeTable() []route {
	return []route{
		{"GET", "/api/v1/proxies", s.listProxies},
		{"POST", "/api/v1/proxies", s.createProxy},
		{"GET", "/api/v1/proxies/{name}", s.readProxy},
		{"PUT", "/api/v1/proxies/{name}", s.updateProxy},
		{"DELETE", "/api/v1/proxies/{name}", s.deleteProxy},
		{"GET", "/api/v1/proxies/{name}/templates", s.listTemplates},
		{"POST", "/api/v1/proxies/{name}/templates/{file}", s.uploadTemplate},
		{"PUT", "/api/v1/proxies/{name}/templates/{file}", s.uploadTemplate},
		{"DELETE", "/api/v1/proxies/{name}/templates/{file}", s.deleteTemplate},
		{"POST", "/api/v1/config/reload", s.reload},
		{"GET", "/api/v1/access", s.access},
		{"GET", "/api/v1/schema", s.schema},
		{"GET", "/api/v1/status", s.status},
	}
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	allow := map[string][]string{}
	var patterns []string
	for _, rt := range s.routeTable() {
		mux.HandleFunc(rt.method+" "+rt.pattern, rt.handle)
		if _, seen := allow[rt.pattern]; !seen {
			patterns = append(patterns, rt.pattern)
		}
		allow[rt.pattern] = append(allow[rt.pattern], rt.method)
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
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apierr.Write(w, apierr.NotFound, "no such path: "+r.URL.Path)
	})
	return mux
}

// policy is the configuration in force and who is calling: access is
// always decided by the configuration running now, never by what the store
// holds, so a token written into the store out of band has no effect until
// a reload puts it in force.
func (s *Server) policy(r *http.Request) (*config.Document, Caller) {
	doc := s.ctl.Holder().Load().Document
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
	if c.Anonymous {
		apierr.Write(w, apierr.Unauthorized, "this action needs a token: send "+string(doc.Admin.Auth.Header)+": Bearer <token>")
	} else {
		apierr.Write(w, apierr.Forbidden, "token "+string(c.Name)+" may not "+string(act)+" here")
	}
	return false
}

// inForce returns the proxy of that name in the configuration in force.
func (s *Server) inForce(name string) *config.Proxy {
	doc := s.ctl.Holder().Load().Document
	for i := range doc.Proxies {
		if string(doc.Proxies[i].Name) == name {
			return &doc.Proxies[i]
		}
	}
	return nil
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
		conflict *runtime.Conflict
		mismatch *revisionMismatch
		notFound *notFound
		np       *runtime.NotPromoted
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
