package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/doppelproxy/doppel/internal/jsonbody"
	"github.com/doppelproxy/doppel/internal/record"
)

// maxRecordBody bounds a recording's request body.
const maxRecordBody = 64 << 10

type recordRequest struct {
	Revision *string `json:"revision"`
	Match    string  `json:"match"`
	Session  string  `json:"session"`
	Since    string  `json:"since"`
	Apply    bool    `json:"apply"`
	// Local records from the journal of the replica asked alone.
	Local bool `json:"local"`
}

type recordPreview struct {
	Mocks     []map[string]any `json:"mocks"`
	Exchanges int              `json:"exchanges"`
	Message   string           `json:"message,omitempty"`
	Replicas  replicasAnswer   `json:"replicas"`
}

// recordProxy turns the journal's forwarded exchanges of a proxy into
// mocks (SPEC §17.6): shown with apply false, appended through the same
// compare-and-swap as an update with apply true.
func (s *Server) recordProxy(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	// Reading comes first, before the body and whether the proxy exists;
	// applying needs update too, once the body says so.
	if !s.authorize(w, r, ActRead, s.inForce(name)) {
		return
	}
	req, ok := readRecordRequest(w, r)
	if !ok {
		return
	}
	if req.Apply && !s.authorize(w, r, ActUpdate, s.inForce(name)) {
		return
	}
	doc, _ := s.policy(r)
	p := doc.Proxy(name)
	bodies, ok := s.recordable(w, doc, p, name, req)
	if !ok {
		return
	}
	entries, fleet, cut, ok := s.recordedEntries(w, r, name, req)
	if !ok {
		return
	}
	var taken []string
	for _, m := range p.Mocks {
		taken = append(taken, string(m.Name))
	}
	res, err := record.Mocks(entries, record.Limits{Bodies: bodies, Headers: doc.Journal.HeadersKept(), BodyLimit: int(p.BodyLimit), Taken: taken})
	if err != nil {
		apierr.Write(w, apierr.ConfigInvalid, err.Error())
		return
	}
	preview := recordPreview{Mocks: res.Mocks, Exchanges: res.Exchanges, Message: res.Note, Replicas: fleet}
	if cut > 0 {
		preview.Message = strings.TrimPrefix(preview.Message+fmt.Sprintf("; made from the fleet's newest %d entries of the proxy, %d older ones left out (narrow match or since)", journal.MaxLimit, cut), "; ")
	}
	if preview.Mocks == nil {
		preview.Mocks = []map[string]any{}
		preview.Message = "no forwarded exchange of proxy " + name + " in the journal matches: nothing to record"
	}
	if !req.Apply || len(res.Mocks) == 0 {
		writeJSON(w, http.StatusOK, preview)
		return
	}
	rt, err := s.ctl.Write(r.Context(), func(doc *config.Document) error {
		cur, err := proxyAt(doc, name, *req.Revision)
		if err != nil {
			return err
		}
		next, err := withMocks(cur, res.Mocks)
		if err != nil {
			return err
		}
		*cur = *next
		return nil
	})
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	s.answerProxy(w, http.StatusOK, rt.Document.Proxy(name))
}

// readRecordRequest reads a recording's body, bounded in size and
// nesting, with no key but its own; false once it has answered why not.
func readRecordRequest(w http.ResponseWriter, r *http.Request) (*recordRequest, bool) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxRecordBody+1))
	if err != nil {
		apierr.Write(w, apierr.ConfigInvalid, "the body could not be read: "+err.Error())
		return nil, false
	}
	if len(raw) > maxRecordBody {
		apierr.Write(w, apierr.UploadTooLarge, fmt.Sprintf("a recording's body is at most %d bytes", maxRecordBody))
		return nil, false
	}
	if err := config.CheckNesting(raw); err != nil {
		apierr.Write(w, apierr.ConfigInvalid, err.Error())
		return nil, false
	}
	var req recordRequest
	if err := jsonbody.DecodeKnown(raw, &req); err != nil {
		const shape = `{"revision", "match", "session", "since", "apply", "local"}`
		var unknown *jsonbody.UnknownKeyError
		if errors.As(err, &unknown) {
			apierr.Write(w, apierr.ConfigInvalid, fmt.Sprintf("unknown key %q: the body is %s", unknown.Key, shape))
			return nil, false
		}
		apierr.Write(w, apierr.ConfigInvalid, bodyProblem(err, shape))
		return nil, false
	}
	return &req, true
}

// recordable checks that proxy p (name) can be recorded as req asks: it
// exists and is HTTP, an apply names a revision, and the journal keeps
// exchanges and their bodies. It returns the bytes kept of each body;
// false once it has answered why not.
func (s *Server) recordable(w http.ResponseWriter, doc *config.Document, p *config.Proxy, name string, req *recordRequest) (bodies int, ok bool) {
	if p == nil {
		apierr.Write(w, apierr.NotFound, "proxy "+name+" does not exist")
		return 0, false
	}
	if p.Type == config.KindTCP {
		apierr.Write(w, apierr.ConfigInvalid, "proxy "+name+" is a tcp proxy: it relays bytes, and has no exchanges to record as mocks")
		return 0, false
	}
	if req.Apply && req.Revision == nil {
		apierr.Write(w, apierr.RevisionRequired, "apply: true needs the revision of the proxy it adds to, as an update does")
		return 0, false
	}
	if req.Revision != nil {
		if _, err := config.ParseRevision(*req.Revision); err != nil {
			apierr.Write(w, apierr.ConfigInvalid, "revision: "+err.Error())
			return 0, false
		}
	}
	if doc.Journal.Bodies != nil {
		bodies = int(*doc.Journal.Bodies)
	}
	switch {
	case s.journal.Size() == 0:
		apierr.Write(w, apierr.ConfigInvalid, "the journal is off (journal.size is 0): recording reads the exchanges it keeps")
		return 0, false
	case bodies == 0:
		apierr.Write(w, apierr.ConfigInvalid, "journal.bodies is 0: recording needs the bodies the journal keeps; set journal.bodies (4Ki by default)")
		return 0, false
	}
	return bodies, true
}

// recordedEntries are the journal's entries of the proxy that req
// selects: this replica's, or the fleet's newest MaxLimit merged by time
// (cut says how many older ones were left out), with the replicas that
// answered; false once it has answered why not.
func (s *Server) recordedEntries(w http.ResponseWriter, r *http.Request, name string, req *recordRequest) (entries []*journal.Entry, fleet replicasAnswer, cut int, ok bool) {
	q := url.Values{"proxy": {name}}
	for k, v := range map[string]string{"path": req.Match, "session": req.Session, "since": req.Since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	f, err := journal.ParseFilter(q)
	if err != nil {
		apierr.Write(w, apierr.ConfigInvalid, recordParam(err))
		return nil, fleet, 0, false
	}
	fleet = replicasAnswer{Answered: []string{s.Fleet.Self().ID}, Missing: []missing{}}
	if !s.fleetWide(r, req.Local) {
		if entries, err = f.Select(s.journal.Entries(), func(string) bool { return true }); err != nil {
			apierr.Write(w, apierr.ConfigInvalid, recordParam(err))
			return nil, fleet, 0, false
		}
		return entries, fleet, 0, true
	}
	// Every live replica's exchanges of the proxy, merged by time: the
	// newest MaxLimit of the fleet.
	wide := url.Values{}
	for k, v := range q {
		wide[k] = v
	}
	wide.Set("limit", strconv.Itoa(journal.MaxLimit))
	fw, err := journal.ParseFilter(wide)
	if err != nil {
		apierr.Write(w, apierr.ConfigInvalid, recordParam(err))
		return nil, fleet, 0, false
	}
	page, err := s.gatherFleet(r, wide, fw, func(string) bool { return true })
	if err != nil {
		apierr.Write(w, apierr.ConfigInvalid, recordParam(err))
		return nil, fleet, 0, false
	}
	for _, m := range page.all {
		var e journal.Entry
		if err := json.Unmarshal(m.raw, &e); err != nil {
			apierr.Write(w, apierr.InternalError, "an entry of the fleet's journal does not read back: "+err.Error())
			return nil, fleet, 0, false
		}
		entries = append(entries, &e)
	}
	return entries, replicasAnswer{Answered: page.answered, Missing: page.gone}, page.more, true
}

// withMocks is p with mocks appended, parsed as any proxy document is.
func withMocks(p *config.Proxy, mocks []map[string]any) (*config.Proxy, error) {
	v, _, err := proxyJSON(p)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("the proxy's document is not an object")
	}
	list, _ := m["mocks"].([]any)
	for _, mock := range mocks {
		list = append(list, mock)
	}
	m["mocks"] = list
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return config.ParseProxy(raw)
}

// recordParam names a recording's own keys in a filter's complaint.
func recordParam(err error) string {
	var pe *journal.ParamError
	if errors.As(err, &pe) && pe.Param == "path" {
		return "match: " + pe.Reason
	}
	return err.Error()
}
