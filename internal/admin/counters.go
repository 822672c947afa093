package admin

import (
	"net/http"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
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
	if p := s.compiled(string(c.Name)); p != nil {
		for _, n := range p.Counters.List() {
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
	p := s.compiled(name)
	if c == nil || p == nil {
		apierr.Write(w, apierr.NotFound, "proxy "+name+" does not exist")
		return
	}
	p.Counters.Reset()
	p.Attempts.Reset()
	w.WriteHeader(http.StatusNoContent)
}
