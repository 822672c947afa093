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
	"net"
	"net/http"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/doppelproxy/doppel/internal/tcp"
)

// Version is what GET /version answers: the Toxiproxy release whose API
// this one follows where its releases differ.
const Version = "2.12.0"

// Server is the API and the proxies it made. The zero value is ready.
type Server struct {
	// Report receives every connection's record when it ends; nil for
	// none. It must not call the server.
	Report func(tcp.Record)
	// Host is the API's own address: its proxies may listen there as on
	// loopback; AllowListen are the other addresses they may listen on
	// (toxiproxy.host and toxiproxy.allow_listen).
	Host        netip.Addr
	AllowListen []netip.Addr
	// Own lists Doppel's TCP listeners as they are now, the API's among
	// them; an upstream reaching one is refused. It is called with the
	// server's lock held and must not call the server; nil for none.
	Own func() []Listener
	// ProxyMetrics and RuntimeMetrics serve Toxiproxy's Prometheus
	// metrics at /metrics, as its -proxy-metrics and -runtime-metrics
	// flags do: its proxies' byte counters, and the Go runtime's, the
	// build's and the process's. Both false, /metrics is not served
	// (404), as in Toxiproxy. Set before the first request.
	ProxyMetrics, RuntimeMetrics bool

	mu      sync.Mutex
	proxies map[string]*proxy
	mux     *http.ServeMux
	ids     *requestIDs
	metrics *metrics // nil when neither is served
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
	if _, route := s.mux.Handler(r); route != "" {
		w.Header().Set(requestIDHeader, s.ids.next(time.Now()))
	}
	if isBrowser(r.UserAgent()) {
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
	m.HandleFunc("GET /version", version)
	if s.ProxyMetrics || s.RuntimeMetrics {
		s.metrics = newMetrics(s.ProxyMetrics, s.RuntimeMetrics)
		// Any method, as Toxiproxy's route takes.
		m.Handle("/metrics", s.metrics.handler)
	}
	s.mux, s.ids = m, newRequestIDs()
}

// version answers as Toxiproxy 2.12.0 does, byte for byte: an object
// with a space after its colon, a newline, and its own Content-Type
// (2.5.0 answered the version alone, as text).
func version(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	_, _ = fmt.Fprintf(w, "{\"version\": %q}\n", Version)
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
// address in use: 500, as Toxiproxy answers it. A listen's error is
// net.Listen's own, as Toxiproxy's message is ("listen tcp
// 127.0.0.1:8474: bind: address already in use"), without the words
// the relay puts before it.
func serverError(err error) *apiError {
	if op, ok := errors.AsType[*net.OpError](err); ok {
		err = op
	}
	return &apiError{err.Error(), http.StatusInternalServerError}
}

func tooMany(what string, limit int) *apiError {
	return &apiError{fmt.Sprintf("too many %s: at most %d", what, limit), http.StatusBadRequest}
}

// writeError answers e as Toxiproxy does, through http.Error: the JSON
// body and a newline, as text/plain with nosniff.
func writeError(w http.ResponseWriter, e *apiError) {
	b, _ := json.Marshal(e) // two fields that always encode
	http.Error(w, string(b), e.Status)
}

// writeJSON answers v's JSON, with no newline after it, as Toxiproxy
// writes json.Marshal's bytes.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, &apiError{"the answer could not be written", http.StatusInternalServerError})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
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
