// Package toxiproxy serves Toxiproxy 2.x's HTTP API (SPEC §17.8) over
// Doppel's TCP relay (internal/tcp), so that Toxiproxy's clients (Go,
// Ruby, the Testcontainers modules) drive Doppel unchanged: the same
// paths, JSON shapes, status codes and error bodies. What a client makes
// lives in this server's memory, as in Toxiproxy, never in Doppel's
// document.
package toxiproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/doppelproxy/doppel/internal/tcp"
)

// Version is what GET /version answers: the Toxiproxy release whose API
// this one follows.
const Version = "2.5.0"

// Bounds of what a client may make.
const (
	MaxBody    = 1 << 20 // bytes of one request body
	MaxProxies = 1000
	MaxToxics  = 1000 // per proxy
)

// Server is the API and the proxies it made. The zero value is ready.
type Server struct {
	// Report receives every connection's record when it ends; nil for
	// none. It must not call the server.
	Report func(tcp.Record)

	mu      sync.Mutex
	proxies map[string]*proxy
	mux     *http.ServeMux
	once    sync.Once
}

// Close stops every proxy and ends its connections; the proxies stay
// listed, disabled.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.proxies {
		p.stop()
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.once.Do(s.routes)
	// As Toxiproxy: a browser is refused, so that a web page cannot drive
	// the API from a user's machine.
	if strings.HasPrefix(r.UserAgent(), "Mozilla/") {
		http.Error(w, "User agent not allowed", http.StatusForbidden)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("POST /reset", s.reset)
	m.HandleFunc("GET /proxies", s.proxyIndex)
	m.HandleFunc("POST /proxies", s.proxyCreate)
	m.HandleFunc("POST /populate", s.populate)
	m.HandleFunc("GET /proxies/{proxy}", s.proxyShow)
	// PATCH as well: the method later Toxiproxy releases prefer.
	m.HandleFunc("POST /proxies/{proxy}", s.proxyUpdate)
	m.HandleFunc("PATCH /proxies/{proxy}", s.proxyUpdate)
	m.HandleFunc("DELETE /proxies/{proxy}", s.proxyDelete)
	m.HandleFunc("GET /proxies/{proxy}/toxics", s.toxicIndex)
	m.HandleFunc("POST /proxies/{proxy}/toxics", s.toxicCreate)
	m.HandleFunc("GET /proxies/{proxy}/toxics/{toxic}", s.toxicShow)
	m.HandleFunc("POST /proxies/{proxy}/toxics/{toxic}", s.toxicUpdate)
	m.HandleFunc("PATCH /proxies/{proxy}/toxics/{toxic}", s.toxicUpdate)
	m.HandleFunc("DELETE /proxies/{proxy}/toxics/{toxic}", s.toxicDelete)
	m.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain;charset=utf-8")
		_, _ = io.WriteString(w, Version)
	})
	s.mux = m
}

// apiError is Toxiproxy's error body.
type apiError struct {
	Message string `json:"error"`
	Status  int    `json:"status"`
}

func (e *apiError) Error() string { return e.Message }

// Toxiproxy's errors, word for word.
var (
	errMissingField     = &apiError{"missing required field", http.StatusBadRequest}
	errProxyNotFound    = &apiError{"proxy not found", http.StatusNotFound}
	errProxyExists      = &apiError{"proxy already exists", http.StatusConflict}
	errInvalidStream    = &apiError{"stream was invalid, can be either upstream or downstream", http.StatusBadRequest}
	errInvalidToxicType = &apiError{"invalid toxic type", http.StatusBadRequest}
	errToxicExists      = &apiError{"toxic already exists", http.StatusConflict}
	errToxicNotFound    = &apiError{"toxic not found", http.StatusNotFound}
)

func badBody(err error) *apiError {
	return &apiError{"bad request body: " + err.Error(), http.StatusBadRequest}
}

func missing(field string) *apiError {
	return &apiError{errMissingField.Message + ": " + field, errMissingField.Status}
}

// serverError is a failure without a status of its own, such as a listen
// address in use: 500, as Toxiproxy answers it.
func serverError(err error) *apiError {
	return &apiError{err.Error(), http.StatusInternalServerError}
}

func tooMany(what string, limit int) *apiError {
	return &apiError{fmt.Sprintf("too many %s: at most %d", what, limit), http.StatusBadRequest}
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, status = []byte(`{"error":"the answer could not be written","status":500}`), http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// readBody reads at most MaxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &apiError{fmt.Sprintf("bad request body: more than %d bytes", MaxBody), http.StatusRequestEntityTooLarge}
		}
		return nil, badBody(err)
	}
	return b, nil
}

// lookup is the proxy of the request's path, with the lock held.
func (s *Server) lookup(r *http.Request) (*proxy, *apiError) {
	p, ok := s.proxies[r.PathValue("proxy")]
	if !ok {
		return nil, errProxyNotFound
	}
	return p, nil
}

func (s *Server) newProxy(name, listen, upstream string) *proxy {
	return &proxy{name: name, listen: listen, upstream: upstream, report: s.Report}
}

func (s *Server) proxyIndex(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := make(map[string]proxyJSON, len(s.proxies))
	for name, p := range s.proxies {
		out[name] = p.json()
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// proxyInput is a proxy a client sends; enabled is true unless given.
type proxyInput struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Enabled  *bool  `json:"enabled"`
}

func decodeProxy(body []byte) (*proxyInput, *apiError) {
	var in proxyInput
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, badBody(err)
	}
	if in.Name == "" {
		return nil, missing("name")
	}
	if in.Upstream == "" {
		return nil, missing("upstream")
	}
	return &in, nil
}

func (in *proxyInput) enabled() bool { return in.Enabled == nil || *in.Enabled }

func (s *Server) proxyCreate(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	in, e := decodeProxy(body)
	if e != nil {
		writeError(w, e)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.proxies[in.Name]; ok {
		writeError(w, errProxyExists)
		return
	}
	if len(s.proxies) >= MaxProxies {
		writeError(w, tooMany("proxies", MaxProxies))
		return
	}
	p := s.newProxy(in.Name, in.Listen, in.Upstream)
	if in.enabled() {
		if err := p.start(); err != nil {
			writeError(w, serverError(err))
			return
		}
	}
	if s.proxies == nil {
		s.proxies = map[string]*proxy{}
	}
	s.proxies[p.name] = p
	writeJSON(w, http.StatusCreated, p.json())
}

// populate makes or replaces each proxy of a list, as Toxiproxy does: one
// with the same listen and upstream is left as it is, another is stopped
// and replaced (its toxics go). The list is checked whole first; a proxy
// that cannot listen ends it, and the answer names those made so far.
func (s *Server) populate(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	var in []proxyInput
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, badBody(err))
		return
	}
	for i, p := range in {
		if p.Name == "" {
			writeError(w, missing(fmt.Sprintf("name at proxy %d", i+1)))
			return
		}
		if p.Upstream == "" {
			writeError(w, missing(fmt.Sprintf("upstream at proxy %d", i+1)))
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proxies == nil {
		s.proxies = map[string]*proxy{}
	}
	names := map[string]bool{}
	for name := range s.proxies {
		names[name] = true
	}
	for _, p := range in {
		names[p.Name] = true
	}
	if len(names) > MaxProxies {
		writeError(w, tooMany("proxies", MaxProxies))
		return
	}
	var answer struct {
		*apiError
		Proxies []proxyJSON `json:"proxies"`
	}
	answer.Proxies = []proxyJSON{}
	for _, in := range in {
		if old, ok := s.proxies[in.Name]; ok {
			if old.listen == in.Listen && old.upstream == in.Upstream {
				answer.Proxies = append(answer.Proxies, old.json())
				continue
			}
			old.stop()
		}
		p := s.newProxy(in.Name, in.Listen, in.Upstream)
		if in.enabled() {
			if err := p.start(); err != nil {
				answer.apiError = serverError(err)
				break
			}
		}
		s.proxies[p.name] = p
		answer.Proxies = append(answer.Proxies, p.json())
	}
	status := http.StatusCreated
	if answer.apiError != nil {
		status = answer.Status
	}
	writeJSON(w, status, answer)
}

// lockedProxy takes the server's lock and finds the path's proxy; when
// there is none it answers Toxiproxy's 404 and lets the lock go.
func (s *Server) lockedProxy(w http.ResponseWriter, r *http.Request) (*proxy, bool) {
	s.mu.Lock()
	p, e := s.lookup(r)
	if e != nil {
		s.mu.Unlock()
		writeError(w, e)
		return nil, false
	}
	return p, true
}

func (s *Server) proxyShow(w http.ResponseWriter, r *http.Request) {
	p, ok := s.lockedProxy(w, r)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, p.json())
}

// proxyUpdate changes enabled, listen and upstream, each the proxy's own
// unless given: a new address stops the proxy, and it starts again when
// it is to be enabled.
func (s *Server) proxyUpdate(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	p, ok := s.lockedProxy(w, r)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	in := struct {
		Listen   string `json:"listen"`
		Upstream string `json:"upstream"`
		Enabled  bool   `json:"enabled"`
	}{p.listen, p.upstream, p.enabled}
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, badBody(err))
		return
	}
	if in.Listen != p.listen || in.Upstream != p.upstream {
		p.stop()
		p.listen, p.upstream = in.Listen, in.Upstream
	}
	if in.Enabled != p.enabled {
		if !in.Enabled {
			p.stop()
		} else if err := p.start(); err != nil {
			writeError(w, serverError(err))
			return
		}
	}
	writeJSON(w, http.StatusOK, p.json())
}

func (s *Server) proxyDelete(w http.ResponseWriter, r *http.Request) {
	p, ok := s.lockedProxy(w, r)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	p.stop()
	delete(s.proxies, p.name)
	w.WriteHeader(http.StatusNoContent)
}

// reset enables every proxy and removes every toxic.
func (s *Server) reset(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.proxies))
	for name := range s.proxies {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.proxies[name]
		if err := p.start(); err != nil {
			writeError(w, serverError(err))
			return
		}
		p.toxics = nil
		p.apply()
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) toxicIndex(w http.ResponseWriter, r *http.Request) {
	p, ok := s.lockedProxy(w, r)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, p.toxicList())
}

func (s *Server) toxicCreate(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	p, ok := s.lockedProxy(w, r)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	t, e := decodeToxic(body, func(name string) bool { _, t := p.toxic(name); return t != nil })
	if e != nil {
		writeError(w, e)
		return
	}
	if len(p.toxics) >= MaxToxics {
		writeError(w, tooMany("toxics on a proxy", MaxToxics))
		return
	}
	p.toxics = append(p.toxics, t)
	p.apply()
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) toxicShow(w http.ResponseWriter, r *http.Request) {
	p, ok := s.lockedProxy(w, r)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	_, t := p.toxic(r.PathValue("toxic"))
	if t == nil {
		writeError(w, errToxicNotFound)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) toxicUpdate(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	p, ok := s.lockedProxy(w, r)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	i, t := p.toxic(r.PathValue("toxic"))
	if t == nil {
		writeError(w, errToxicNotFound)
		return
	}
	next, e := decodeUpdate(t, body)
	if e != nil {
		writeError(w, e)
		return
	}
	p.toxics[i] = next
	p.apply()
	writeJSON(w, http.StatusOK, next)
}

func (s *Server) toxicDelete(w http.ResponseWriter, r *http.Request) {
	p, ok := s.lockedProxy(w, r)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	i, t := p.toxic(r.PathValue("toxic"))
	if t == nil {
		writeError(w, errToxicNotFound)
		return
	}
	p.toxics = append(p.toxics[:i:i], p.toxics[i+1:]...)
	p.apply()
	w.WriteHeader(http.StatusNoContent)
}
