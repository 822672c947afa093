package admin

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/fleet"
	"github.com/doppelproxy/doppel/internal/journal"
)

// The request journal's endpoints (SPEC §17.4). An entry is shown to a
// caller who may read its proxy; an entry of no proxy (unresolved), or of
// one no longer configured, to a caller who may read without a proxy.

// maxVerifyBody bounds a verification's body.
const maxVerifyBody = 64 << 10

// readsOf is who may read which proxy's entries, decided once per request.
// ok is false, and the refusal written, when the caller may read none.
func (s *Server) readsOf(w http.ResponseWriter, r *http.Request, act Action) (func(string) bool, bool) {
	doc, c := s.policy(r)
	may := map[string]bool{"": allowed(doc, c, act, nil)}
	any := may[""]
	for i := range doc.Proxies {
		p := &doc.Proxies[i]
		may[string(p.Name)] = allowed(doc, c, act, p)
		any = any || may[string(p.Name)]
	}
	if !any {
		s.refuse(w, doc, c, act)
		return nil, false
	}
	global := may[""]
	return func(proxy string) bool {
		if ok, known := may[proxy]; known {
			return ok
		}
		return global
	}, true
}

func filterFailed(w http.ResponseWriter, err error) {
	apierr.Write(w, apierr.ConfigInvalid, err.Error())
}

// readQueryOf is what a read of the journal may see and the filter its
// query q asks for; false when the answer was written (refused).
func (s *Server) readQueryOf(w http.ResponseWriter, r *http.Request, q url.Values) (func(string) bool, *journal.Filter, bool) {
	visible, ok := s.readsOf(w, r, ActRead)
	if !ok {
		return nil, nil, false
	}
	f, err := journal.ParseFilter(q)
	if err != nil {
		filterFailed(w, err)
		return nil, nil, false
	}
	return visible, f, true
}

// journalQuery is a read of the journal's query: its parameters without
// local, whether it said local=true, what the caller may see and the
// filter; false when the answer was written (refused).
func (s *Server) journalQuery(w http.ResponseWriter, r *http.Request) (q url.Values, local bool, visible func(string) bool, f *journal.Filter, ok bool) {
	q = r.URL.Query()
	local, err := localParam(q)
	if err != nil {
		filterFailed(w, err)
		return nil, false, nil, nil, false
	}
	visible, f, ok = s.readQueryOf(w, r, q)
	return q, local, visible, f, ok
}

func (s *Server) listRequests(w http.ResponseWriter, r *http.Request) {
	q, local, visible, f, ok := s.journalQuery(w, r)
	if !ok {
		return
	}
	if s.fleetWide(r, local) {
		s.listFleet(w, r, q, f, visible)
		return
	}
	page, err := s.journal.List(f, visible)
	if err != nil {
		filterFailed(w, err)
		return
	}
	self := s.Fleet.Self().ID
	fleetJSON, _ := json.Marshal(replicasAnswer{Answered: []string{self}, Missing: []missing{}})
	writeEntriesOf(w, http.StatusOK, "", fmt.Sprintf(`,"dropped":%d,"more":%d,"replicas":%s`, s.journal.Dropped(), page.More, fleetJSON), page.Each, self)
}

// writeEntriesOf answers a JSON object of the members before (each ending
// with a comma), then "requests", the entries each yields, then the
// members after (each beginning with one). The entries are encoded one
// at a time as they are written: an answer of a full journal is never in
// memory whole. A client that leaves ends it.
// Each entry says replica served it when replica is not "".
func writeEntriesOf(w http.ResponseWriter, status int, before, after string, each func(func(*journal.Entry) error) error, replica string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	bw := bufio.NewWriterSize(w, 32<<10)
	_, _ = bw.WriteString("{" + before + `"requests":[`)
	enc := json.NewEncoder(bw)
	first := true
	err := each(func(e *journal.Entry) error {
		if !first {
			if err := bw.WriteByte(','); err != nil {
				return err
			}
		}
		first = false
		if replica == "" {
			return enc.Encode(e)
		}
		raw, err := json.Marshal(e)
		if err == nil {
			_, err = bw.Write(withReplica(raw, replica))
		}
		return err
	})
	if err != nil {
		return
	}
	_, _ = bw.WriteString("]" + after + "}\n")
	_ = bw.Flush()
}

func (s *Server) clearRequests(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	local, err := localParam(q)
	if err != nil {
		filterFailed(w, err)
		return
	}
	for k := range q {
		if k != "proxy" {
			apierr.Write(w, apierr.ConfigInvalid, k+": unknown parameter; clearing takes proxy and local only")
			return
		}
	}
	var clear func(string) bool
	if names := q["proxy"]; len(names) > 0 {
		// Each proxy named needs update, decided before whether it exists.
		doc, c := s.policy(r)
		named := map[string]bool{}
		for _, n := range names {
			if !allowed(doc, c, ActUpdate, doc.Proxy(n)) {
				s.refuse(w, doc, c, ActUpdate)
				return
			}
			named[n] = true
		}
		clear = func(p string) bool { return named[p] }
	} else {
		var ok bool
		if clear, ok = s.readsOf(w, r, ActUpdate); !ok {
			return
		}
	}
	s.journal.Clear(clear)
	if s.fleetWide(r, local) {
		s.clearFleet(w, r, q)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// verifyFailure is the 409's body but its requests: the envelope, and
// what was found.
type verifyFailure struct {
	apierr.Envelope
	Matched         int            `json:"matched"`
	GapsMS          []float64      `json:"gaps_ms"`
	RequestsOmitted int            `json:"requests_omitted"`
	Replicas        replicasAnswer `json:"replicas"`
	Partial         bool           `json:"partial,omitempty"`
}

func (s *Server) verifyRequests(w http.ResponseWriter, r *http.Request) {
	visible, ok := s.readsOf(w, r, ActRead)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxVerifyBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			apierr.Write(w, apierr.UploadTooLarge, fmt.Sprintf("a verification is at most %d bytes", maxVerifyBody))
			return
		}
		apierr.Write(w, apierr.ConfigInvalid, "the body could not be read: "+err.Error())
		return
	}
	v, err := journal.ParseVerification(body)
	if err != nil {
		filterFailed(w, err)
		return
	}
	if _, fromPeer := r.Context().Value(fleetCaller{}).(fleet.Identity); fromPeer {
		s.verifyPart(w, v, visible)
		return
	}
	if s.fleetWide(r, v.Local) {
		s.verifyFleet(w, r, body, v, visible)
		return
	}
	points, newest := s.journal.Matched(v, visible)
	self := s.Fleet.Self().ID
	shown := make([]merged, len(newest))
	for i, e := range newest {
		shown[i] = localEntry(e, self)
	}
	writeVerdict(w, v, points, shown, replicasAnswer{Answered: []string{self}, Missing: []missing{}})
}

// writeVerdict answers what the points say: 200 with what was found, or
// VERIFICATION_FAILED with the newest MaxRefuted entries of shown; and
// which replicas' journals it read.
func writeVerdict(w http.ResponseWriter, v *journal.Verification, points []journal.Point, shown []merged, fleet replicasAnswer) {
	res := v.Check(points)
	partial := len(fleet.Missing) > 0
	if res.Failed == "" {
		out := map[string]any{"matched": res.Matched, "gaps_ms": res.GapsMS, "replicas": fleet}
		if partial {
			out["partial"] = true
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	shown = shown[len(shown)-min(len(shown), journal.MaxRefuted):]
	b, _ := json.Marshal(verifyFailure{
		Envelope: apierr.Envelope{Status: "error", Message: res.Failed, Code: apierr.VerificationFailed},
		Matched:  res.Matched, GapsMS: res.GapsMS, RequestsOmitted: res.Matched - len(shown),
		Replicas: fleet, Partial: partial,
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(apierr.VerificationFailed.Status())
	bw := bufio.NewWriterSize(w, 32<<10)
	_, _ = bw.Write(b[:len(b)-1])
	_, _ = bw.WriteString(`,"requests":[`)
	for i, m := range shown {
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		_, _ = bw.Write(m.raw)
	}
	_, _ = bw.WriteString("]}\n")
	_ = bw.Flush()
}
