package admin

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
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

func (s *Server) listRequests(w http.ResponseWriter, r *http.Request) {
	visible, ok := s.readsOf(w, r, ActRead)
	if !ok {
		return
	}
	f, err := journal.ParseFilter(r.URL.Query())
	if err != nil {
		filterFailed(w, err)
		return
	}
	page, err := s.journal.List(f, visible)
	if err != nil {
		filterFailed(w, err)
		return
	}
	writeEntries(w, http.StatusOK, "", fmt.Sprintf(`,"dropped":%d,"more":%d`, s.journal.Dropped(), page.More), page.Each)
}

// writeEntries answers a JSON object of the members before (each ending
// with a comma), then "requests", the entries each yields, then the
// members after (each beginning with one). The entries are encoded one
// at a time as they are written: an answer of a full journal is never in
// memory whole. A client that leaves ends it.
func writeEntries(w http.ResponseWriter, status int, before, after string, each func(func(*journal.Entry) error) error) {
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
		return enc.Encode(e)
	})
	if err != nil {
		return
	}
	_, _ = bw.WriteString("]" + after + "}\n")
	_ = bw.Flush()
}

func (s *Server) clearRequests(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "proxy" {
			apierr.Write(w, apierr.ConfigInvalid, k+": unknown parameter; clearing takes proxy only")
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
	w.WriteHeader(http.StatusNoContent)
}

// streamKeepAlive is how often an idle stream sends a comment, so that
// proxies between do not close it and a client that left is noticed.
const streamKeepAlive = 15 * time.Second

func (s *Server) streamRequests(w http.ResponseWriter, r *http.Request) {
	visible, ok := s.readsOf(w, r, ActRead)
	if !ok {
		return
	}
	f, err := journal.ParseFilter(r.URL.Query())
	if err != nil {
		filterFailed(w, err)
		return
	}
	// Subscribed before the kept entries are read: an entry recorded
	// meanwhile is in one or the other, and seq tells which were sent.
	sub := s.journal.Subscribe(func(e *journal.Entry) bool { return visible(e.Proxy) && f.Matches(e) })
	defer s.journal.Unsubscribe(sub)
	var replay []*journal.Entry
	resumed := true
	if id := r.Header.Get("Last-Event-ID"); id != "" || f.Replays() {
		kept := s.journal.Entries()
		resumed = f.Resume(id, kept, visible)
		if f.Replays() {
			if replay, err = f.Select(kept, visible); err != nil {
				filterFailed(w, err)
				return
			}
		}
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !resumed {
		_, _ = io.WriteString(w, ": the last event's entry is no longer kept; new entries follow\n\n")
	} else {
		_, _ = io.WriteString(w, ": the journal's entries follow\n\n")
	}
	// What was replayed, by its order: only those are skipped when they
	// come live (an entry recorded meanwhile may be older than the newest
	// replayed, and not among them).
	sent := make(map[uint64]struct{}, len(replay))
	for _, e := range replay {
		if err := writeEvent(w, e); err != nil {
			return
		}
		sent[e.Seq()] = struct{}{}
	}
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(streamKeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			_, err = io.WriteString(w, ": keep-alive\n\n")
		case e := <-sub.C:
			if _, ok := sent[e.Seq()]; ok {
				delete(sent, e.Seq())
				continue // replayed already
			}
			if n := sub.Dropped(); n > 0 {
				_, _ = fmt.Fprintf(w, "event: dropped\ndata: {\"dropped\":%d}\n\n", n)
			}
			err = writeEvent(w, e)
		}
		if err != nil || rc.Flush() != nil {
			return
		}
	}
}

// writeEvent writes an entry as the event `request`, its id the entry's
// place in the order of recording (what an EventSource sends back as
// Last-Event-ID when it reconnects; request ids repeat with retries).
func writeEvent(w io.Writer, e *journal.Entry) error {
	b, _ := json.Marshal(e)
	_, err := fmt.Fprintf(w, "event: request\nid: %d\ndata: %s\n\n", e.Seq(), b)
	return err
}

// verifyFailure is the 409's body but its requests: the envelope, and
// what was found.
type verifyFailure struct {
	apierr.Envelope
	Matched         int       `json:"matched"`
	GapsMS          []float64 `json:"gaps_ms"`
	RequestsOmitted int       `json:"requests_omitted"`
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
	res := s.journal.Verify(v, visible)
	if res.Failed == "" {
		writeJSON(w, http.StatusOK, res)
		return
	}
	b, _ := json.Marshal(verifyFailure{
		Envelope: apierr.Envelope{Status: "error", Message: res.Failed, Code: apierr.VerificationFailed},
		Matched:  res.Matched, GapsMS: res.GapsMS, RequestsOmitted: res.Omitted,
	})
	writeEntries(w, apierr.VerificationFailed.Status(), string(b[1:len(b)-1])+",", "", func(yield func(*journal.Entry) error) error {
		for _, e := range res.Entries {
			if err := yield(e); err != nil {
				return err
			}
		}
		return nil
	})
}
