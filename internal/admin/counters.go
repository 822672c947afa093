package admin

import (
	"net/http"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/runtime"
)

// counterJSON is one counter of a proxy's fault conditions (SPEC §17.3).
type counterJSON struct {
	Fault     string  `json:"fault"`
	Mock      *string `json:"mock"`
	Key       string  `json:"key"`
	Count     uint64  `json:"count"`
	FirstSeen string  `json:"first_seen"`
}

// compiled is the proxy of that name in the runtime in force.
func (s *Server) compiled(name string) *runtime.Proxy {
	for _, p := range s.ctl.Runtime().Proxies {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// listCounters answers GET /api/v1/proxies/{name}/counters.
func (s *Server) listCounters(w http.ResponseWriter, r *http.Request) {
	c, ok := s.readable(w, r)
	if !ok {
		return
	}
	out := []counterJSON{}
	counters, ok := s.countersFor(w, r, string(c.Name))
	if !ok {
		return
	}
	if counters != nil {
		list, err := counters.List(r.Context())
		if err != nil {
			apierr.Write(w, apierr.StoreError, "cannot read the fleet's counters: "+err.Error())
			return
		}
		for _, n := range list {
			e := counterJSON{Fault: n.Fault, Key: n.Key, Count: n.N, FirstSeen: n.FirstSeen.UTC().Format(time.RFC3339Nano)}
			if n.Mock != "" {
				m := n.Mock
				e.Mock = &m
			}
			out = append(out, e)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"counters": out})
}

// resetCounters answers DELETE /api/v1/proxies/{name}/counters: the
// counts start again, and so do the attempts a seed counts.
func (s *Server) resetCounters(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	c := s.inForce(name)
	if !s.authorize(w, r, ActUpdate, c) {
		return
	}
	if c == nil || s.compiled(name) == nil && s.tcpCounters(name) == nil {
		apierr.Write(w, apierr.NotFound, "proxy "+name+" does not exist")
		return
	}
	if tc := s.tcpCounters(name); tc != nil && r.URL.Query().Get("session") == "" {
		_ = tc.Reset(r.Context()) // a tcp proxy's are its own
		w.WriteHeader(http.StatusNoContent)
		return
	}
	p, ok := s.countersOf(w, r, name)
	if !ok {
		return
	}
	if p == nil {
		apierr.Write(w, apierr.NotFound, "proxy "+name+" does not exist")
		return
	}
	p.Attempts.Reset()
	if err := p.Counters.Reset(r.Context()); err != nil {
		apierr.Write(w, apierr.StoreError, "cannot reset the fleet's counters: "+err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// tcpCounters are a running tcp proxy's when counts; nil for an http
// proxy or none.
func (s *Server) tcpCounters(name string) *fault.Counters {
	if s.TCPCounters == nil {
		return nil
	}
	return s.TCPCounters(name)
}

// countersFor are the counters a listing reads: an http proxy's (or its
// session overlay's), or a tcp proxy's, which no session lays over.
func (s *Server) countersFor(w http.ResponseWriter, r *http.Request, name string) (*fault.Counters, bool) {
	if tc := s.tcpCounters(name); tc != nil {
		if id := r.URL.Query().Get("session"); id != "" {
			apierr.Write(w, apierr.NotFound, "proxy "+name+" is a tcp proxy: no session lays an overlay over it")
			return nil, false
		}
		return tc, true
	}
	p, ok := s.countersOf(w, r, name)
	if !ok || p == nil {
		return nil, ok
	}
	return p.Counters, true
}

// countersOf is the compiled proxy whose counters a call reads: the
// proxy's own, or with ?session= that session's overlay of it (404 when
// no live session lays one over it).
func (s *Server) countersOf(w http.ResponseWriter, r *http.Request, name string) (*runtime.Proxy, bool) {
	id := r.URL.Query().Get("session")
	if id == "" {
		return s.compiled(name), true
	}
	if o := s.Sessions.Lookup(id, name); o != nil {
		return o, true
	}
	apierr.Write(w, apierr.NotFound, "no live session "+id+" lays an overlay over proxy "+name)
	return nil, false
}
