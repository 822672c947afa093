package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/jsonbody"
	"github.com/doppelproxy/doppel/internal/session"
)

// sessionJSON is a session as the API shows it.
type sessionJSON struct {
	ID        string   `json:"id"`
	ExpiresAt string   `json:"expires_at"`
	Revision  string   `json:"revision"`
	TTL       int      `json:"ttl"`
	Names     []string `json:"proxies"`
}

func sessionOf(s *session.Session) sessionJSON {
	names := make([]string, 0, len(s.Spec.Proxies))
	for n := range s.Spec.Proxies {
		names = append(names, string(n))
	}
	slices.Sort(names)
	return sessionJSON{ID: s.ID, ExpiresAt: s.ExpiresAt.UTC().Format(time.RFC3339Nano), Revision: s.Revision, TTL: int(*s.Spec.TTL), Names: names}
}

// readSessionBody reads a session's body and authorizes an update of
// every proxy it names, before anything else of it is checked: a body
// that names none (or cannot be read) is authorized against the global
// rule first, then refused.
func (s *Server) readSessionBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, config.MaxSessionSize+1))
	var names []string
	problem := ""
	var top struct {
		Proxies map[string]json.RawMessage `json:"proxies"`
	}
	switch {
	case err != nil:
		problem = "the body could not be read: " + err.Error()
	case len(raw) > config.MaxSessionSize:
		if s.authorize(w, r, ActUpdate, nil) {
			apierr.Write(w, apierr.UploadTooLarge, fmt.Sprintf("a session's body is at most 256 KiB (%d bytes); this one is larger: lay fewer or smaller mocks over the proxies, or split them between sessions", config.MaxSessionSize))
		}
		return nil, false
	default:
		if err := config.CheckNesting(raw); err != nil {
			problem = err.Error()
		} else if err := jsonbody.Decode(raw, &top); err != nil {
			problem = bodyProblem(err, "a session")
		} else {
			names = slices.Sorted(maps.Keys(top.Proxies))
		}
	}
	if !s.mayWrite(w, r, names) {
		return nil, false
	}
	if problem != "" {
		apierr.Write(w, apierr.ConfigInvalid, problem)
		return nil, false
	}
	return raw, true
}

// mayWrite authorizes an update of every proxy named, before their
// existence is known.
func (s *Server) mayWrite(w http.ResponseWriter, r *http.Request, names []string) bool {
	if len(names) == 0 {
		return s.authorize(w, r, ActUpdate, nil)
	}
	for _, n := range names {
		if !s.authorize(w, r, ActUpdate, s.inForce(n)) {
			return false
		}
	}
	return true
}

// mayReadAll says whether the caller may read every proxy of a session.
func (s *Server) mayReadAll(r *http.Request, sess *session.Session) bool {
	doc, c := s.policy(r)
	for n := range sess.Spec.Proxies {
		if !allowed(doc, c, ActRead, doc.Proxy(string(n))) {
			return false
		}
	}
	return true
}

// sessionSpec reads, authorizes and parses a session's body.
func (s *Server) sessionSpec(w http.ResponseWriter, r *http.Request) ([]byte, *config.Session, bool) {
	raw, ok := s.readSessionBody(w, r)
	if !ok {
		return nil, nil, false
	}
	spec, err := config.ParseSession(raw, s.ctl.Runtime().Document)
	if err != nil {
		writeInvalid(w, err)
		return nil, nil, false
	}
	return raw, spec, true
}

func (s *Server) writeSessionFailure(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, session.ErrExists):
		apierr.Write(w, apierr.Conflict, "a session with that id is live: choose another, or leave id out for a new one")
	case errors.Is(err, session.ErrFull):
		apierr.Write(w, apierr.Conflict, err.Error())
	case errors.Is(err, session.ErrTooLarge):
		apierr.Write(w, apierr.UploadTooLarge, err.Error())
	case errors.Is(err, session.ErrNotFound):
		apierr.Write(w, apierr.NotFound, "no live session has that id (it ended, expired or never was)")
	case errors.Is(err, session.ErrRevision):
		apierr.Write(w, apierr.RevisionMismatch, "the session changed since it was read; read it again and reapply the change")
	default:
		var inv *config.Invalid
		if errors.As(err, &inv) {
			apierr.Write(w, apierr.ConfigInvalid, err.Error())
			return
		}
		apierr.Write(w, apierr.StoreError, err.Error())
	}
}

// createSession answers POST /api/v1/sessions.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	raw, spec, ok := s.sessionSpec(w, r)
	if !ok {
		return
	}
	if spec.Revision != "" {
		apierr.Write(w, apierr.ConfigInvalid, "a new session has no revision: send none")
		return
	}
	sess, err := s.Sessions.Create(r.Context(), spec, raw)
	if err != nil {
		s.writeSessionFailure(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/sessions/"+sess.ID)
	w.Header().Set("ETag", `"`+sess.Revision+`"`)
	writeJSON(w, http.StatusCreated, sessionOf(sess))
}

// listSessions answers GET /api/v1/sessions: the live sessions whose
// every proxy the caller may read.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, ActList, nil) {
		return
	}
	out := []sessionJSON{}
	for _, sess := range s.Sessions.List() {
		if s.mayReadAll(r, sess) {
			out = append(out, sessionOf(sess))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

// liveSession finds the session of the path and authorizes act on every
// proxy it names; an unknown id is 404 to a caller who may act on some
// proxy at all (authorization before existence).
func (s *Server) liveSession(w http.ResponseWriter, r *http.Request, act Action) (*session.Session, bool) {
	sess, ok := s.Sessions.Get(r.PathValue("id"))
	if !ok {
		if s.authorize(w, r, act, nil) {
			s.writeSessionFailure(w, session.ErrNotFound)
		}
		return nil, false
	}
	for n := range sess.Spec.Proxies {
		if !s.authorize(w, r, act, s.inForce(string(n))) {
			return nil, false
		}
	}
	return sess, true
}

// readSession answers GET /api/v1/sessions/{id}: the session with what it
// lays over each proxy.
func (s *Server) readSession(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.liveSession(w, r, ActRead)
	if !ok {
		return
	}
	w.Header().Set("ETag", `"`+sess.Revision+`"`)
	v := sessionOf(sess)
	writeJSON(w, http.StatusOK, struct {
		ID        string          `json:"id"`
		ExpiresAt string          `json:"expires_at"`
		Revision  string          `json:"revision"`
		TTL       int             `json:"ttl"`
		Proxies   json.RawMessage `json:"proxies"`
	}{v.ID, v.ExpiresAt, v.Revision, v.TTL, sess.Raw})
}

// updateSession answers PUT /api/v1/sessions/{id}: compare-and-swap on
// the session's revision (the body's, or If-Match).
func (s *Server) updateSession(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.liveSession(w, r, ActUpdate)
	if !ok {
		return
	}
	raw, spec, ok := s.sessionSpec(w, r)
	if !ok {
		return
	}
	if spec.ID != "" && string(spec.ID) != sess.ID {
		apierr.Write(w, apierr.ConfigInvalid, "a session's id cannot change: send its own id, or none")
		return
	}
	header, present, star, err := ifMatch(r)
	if err != nil {
		apierr.Write(w, apierr.ConfigInvalid, err.Error())
		return
	}
	revision := string(spec.Revision)
	switch {
	case present && !star && revision != "" && revision != header:
		apierr.Write(w, apierr.ConfigInvalid, "If-Match and the body's revision differ: send one of them")
		return
	case present && !star:
		revision = header
	}
	if revision == "" {
		apierr.Write(w, apierr.RevisionRequired, "an update carries the revision it is based on: in If-Match, or as revision in the body")
		return
	}
	next, err := s.Sessions.Replace(r.Context(), sess.ID, revision, spec, raw)
	if err != nil {
		s.writeSessionFailure(w, err)
		return
	}
	w.Header().Set("ETag", `"`+next.Revision+`"`)
	writeJSON(w, http.StatusOK, sessionOf(next))
}

// deleteSession answers DELETE /api/v1/sessions/{id}.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.liveSession(w, r, ActUpdate)
	if !ok {
		return
	}
	if err := s.Sessions.Delete(r.Context(), sess.ID); err != nil {
		s.writeSessionFailure(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
