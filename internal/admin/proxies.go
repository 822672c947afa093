package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/change"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/jsonbody"
	"github.com/goccy/go-yaml"
)

// proxyJSON is a proxy document as the API shows it: its canonical form.
func proxyJSON(p *config.Proxy) (any, config.Revision, error) {
	y, err := config.CanonicalProxy(p)
	if err != nil {
		return nil, "", err
	}
	var v any
	if err := yaml.Unmarshal(y, &v); err != nil {
		return nil, "", err
	}
	rev, err := config.ProxyRevision(p)
	return v, rev, err
}

type revisioned struct {
	Revision config.Revision `json:"revision"`
	Proxy    any             `json:"proxy"`
}

func (s *Server) listProxies(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, ActList, nil) {
		return
	}
	doc, caller := s.policy(r)
	out := struct {
		Proxies []revisioned `json:"proxies"`
	}{Proxies: []revisioned{}}
	for i := range doc.Proxies {
		// A proxy's document carries what it injects: the list shows only
		// the proxies the caller may read, as a read of each would.
		if !allowed(doc, caller, ActRead, &doc.Proxies[i]) {
			continue
		}
		v, rev, err := proxyJSON(&doc.Proxies[i])
		if err != nil {
			apierr.Write(w, apierr.StoreError, err.Error())
			return
		}
		out.Proxies = append(out.Proxies, revisioned{rev, v})
	}
	writeJSON(w, http.StatusOK, out)
}

// readable is the proxy the path names, when the caller may read it and
// it exists; otherwise the answer is written (refusal first, so that a
// name cannot be learned from a status code).
func (s *Server) readable(w http.ResponseWriter, r *http.Request) (*config.Proxy, bool) {
	name := r.PathValue("name")
	p := s.inForce(name)
	if !s.authorize(w, r, ActRead, p) {
		return nil, false
	}
	if p == nil {
		apierr.Write(w, apierr.NotFound, "proxy "+name+" does not exist")
		return nil, false
	}
	return p, true
}

func (s *Server) readProxy(w http.ResponseWriter, r *http.Request) {
	p, ok := s.readable(w, r)
	if !ok {
		return
	}
	s.answerProxy(w, http.StatusOK, p)
}

func (s *Server) answerProxy(w http.ResponseWriter, status int, p *config.Proxy) {
	v, rev, err := proxyJSON(p)
	if err != nil {
		apierr.Write(w, apierr.StoreError, err.Error())
		return
	}
	w.Header().Set("ETag", `"`+string(rev)+`"`)
	writeJSON(w, status, revisioned{rev, v})
}

// body is a create or update body: {"revision", "proxy"}, or (update only)
// a bare proxy document with If-Match.
type body struct {
	revision *string
	proxy    *config.Proxy
}

// readBody reads at most a configuration document's worth (1 MiB).
func readBody(w http.ResponseWriter, r *http.Request) (*body, bool) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, config.MaxDocumentSize+1))
	if err != nil {
		apierr.Write(w, apierr.ConfigInvalid, "the body could not be read: "+err.Error())
		return nil, false
	}
	if len(raw) > config.MaxDocumentSize {
		apierr.Write(w, apierr.UploadTooLarge, fmt.Sprintf("a proxy document is at most %d bytes", config.MaxDocumentSize))
		return nil, false
	}
	// Before encoding/json and the YAML parser see it (config.CheckNesting).
	if err := config.CheckNesting(raw); err != nil {
		apierr.Write(w, apierr.ConfigInvalid, err.Error())
		return nil, false
	}
	var top map[string]json.RawMessage
	if err := jsonbody.Decode(raw, &top); err != nil {
		apierr.Write(w, apierr.ConfigInvalid, bodyProblem(err, "a JSON object"))
		return nil, false
	}
	b := &body{}
	doc := raw
	if p, wrapped := top["proxy"]; wrapped {
		for k := range top {
			if k != "proxy" && k != "revision" {
				apierr.Write(w, apierr.ConfigInvalid, fmt.Sprintf("unknown key %q: the body is {\"revision\", \"proxy\"}", k))
				return nil, false
			}
		}
		if rv, ok := top["revision"]; ok {
			var s string
			if err := json.Unmarshal(rv, &s); err != nil {
				apierr.Write(w, apierr.ConfigInvalid, "revision must be a string")
				return nil, false
			}
			b.revision = &s
		}
		doc = p
	}
	p, err := config.ParseProxy(doc)
	if err != nil {
		writeInvalid(w, err)
		return nil, false
	}
	b.proxy = p
	return b, true
}

// bodyProblem is the message for a body jsonbody refused: where it is not
// JSON, or where it is JSON but not shape.
func bodyProblem(err error, shape string) string {
	var je *jsonbody.Error
	if errors.As(err, &je) && je.Syntax {
		return "the body is not valid JSON: " + err.Error()
	}
	return "the body is not " + shape + ": " + err.Error()
}

// writeInvalid answers 400 CONFIG_INVALID with what a parse found: every
// violation on a line of its own.
func writeInvalid(w http.ResponseWriter, err error) {
	msg := err.Error()
	var inv *config.Invalid
	if errors.As(err, &inv) {
		msg = strings.Join(inv.Lines(), "\n")
	}
	apierr.Write(w, apierr.ConfigInvalid, msg)
}

// ifMatch reads If-Match: `"<hex>"` or bare `<hex>`; `*` is no revision at
// all (428); anything else is a bad request.
func ifMatch(r *http.Request) (value string, present, star bool, err error) {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" {
		return "", false, false, nil
	}
	if v == "*" {
		return "", true, true, nil
	}
	v = strings.TrimPrefix(strings.TrimSuffix(v, `"`), `"`)
	if _, err := config.ParseRevision(v); err != nil {
		return "", true, false, fmt.Errorf("If-Match: %v", err)
	}
	return v, true, false, nil
}

func (s *Server) createProxy(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, ActCreate, nil) {
		return
	}
	if r.Header.Get("If-Match") != "" {
		apierr.Write(w, apierr.ConfigInvalid, "a new proxy has no revision: send no If-Match")
		return
	}
	b, ok := readBody(w, r)
	if !ok {
		return
	}
	if b.revision != nil {
		apierr.Write(w, apierr.ConfigInvalid, "a new proxy has no revision: send no revision")
		return
	}
	p := b.proxy
	rt, err := s.ctl.Write(r.Context(), func(doc *config.Document) error {
		if doc.Proxy(string(p.Name)) != nil {
			return &change.Conflict{Reason: "a proxy named " + string(p.Name) + " already exists"}
		}
		if err := s.listenable(p); err != nil {
			return err
		}
		doc.Proxies = append(doc.Proxies, *p)
		return nil
	})
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	doc := rt.Document
	w.Header().Set("Location", "/api/v1/proxies/"+string(p.Name))
	s.answerProxy(w, http.StatusCreated, doc.Proxy(string(p.Name)))
}

func (s *Server) updateProxy(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !s.authorize(w, r, ActUpdate, s.inForce(name)) {
		return
	}
	header, present, star, err := ifMatch(r)
	if err != nil {
		apierr.Write(w, apierr.ConfigInvalid, err.Error())
		return
	}
	b, ok := readBody(w, r)
	if !ok {
		return
	}
	var expected string
	switch {
	case star:
		apierr.Write(w, apierr.RevisionRequired, "If-Match: * is not a revision: send the revision you read")
		return
	case b.revision != nil && present && *b.revision != header:
		apierr.Write(w, apierr.ConfigInvalid, "If-Match and the body's revision disagree")
		return
	case b.revision != nil:
		if _, err := config.ParseRevision(*b.revision); err != nil {
			apierr.Write(w, apierr.ConfigInvalid, "revision: "+err.Error())
			return
		}
		expected = *b.revision
	case present:
		expected = header
	default:
		apierr.Write(w, apierr.RevisionRequired, "an update needs the revision it is based on, in If-Match or the body")
		return
	}
	p := b.proxy
	renamed := string(p.Name) != name
	var moves []change.Move
	if renamed {
		// Template files follow the proxy (change.Controller.Write).
		moves = append(moves, change.Move{From: name, To: string(p.Name)})
	}
	rt, err := s.ctl.Write(r.Context(), func(doc *config.Document) error {
		cur, err := proxyAt(doc, name, expected)
		if err != nil {
			return err
		}
		if renamed && doc.Proxy(string(p.Name)) != nil {
			return &config.Invalid{Violations: []config.Violation{{Path: "name", Message: "proxy " + string(p.Name) + " already exists: a rename needs a free name"}}}
		}
		if err := s.listenable(p); err != nil {
			return err
		}
		*cur = *p
		return nil
	}, moves...)
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	s.answerProxy(w, http.StatusOK, rt.Document.Proxy(string(p.Name)))
}

// listenable refuses a tcp proxy whose listen address is taken by
// another process: stored, it would not be in force.
func (s *Server) listenable(p *config.Proxy) error {
	if p.Type != config.KindTCP || p.Listen == nil || s.TCPListen == nil {
		return nil
	}
	if err := s.TCPListen(p.Listen.String()); err != nil {
		return &config.Invalid{Violations: []config.Violation{{Path: "listen", Message: "cannot be listened on: " + err.Error()}}}
	}
	return nil
}

// proxyAt is the proxy named in doc, inside a write: not found, or at
// another revision than expected (unless expected is ""), is an error the
// write answers with.
func proxyAt(doc *config.Document, name, expected string) (*config.Proxy, error) {
	cur := doc.Proxy(name)
	if cur == nil {
		return nil, &notFound{"proxy " + name}
	}
	if expected != "" {
		if rev, _ := config.ProxyRevision(cur); string(rev) != expected {
			return nil, &revisionMismatch{name: name, current: string(rev)}
		}
	}
	return cur, nil
}

func (s *Server) deleteProxy(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !s.authorize(w, r, ActDelete, s.inForce(name)) {
		return
	}
	header, present, star, err := ifMatch(r)
	if err != nil {
		apierr.Write(w, apierr.ConfigInvalid, err.Error())
		return
	}
	if star {
		present = false // "whatever it is": a delete does not need a revision
	}
	// The proxy's template files go with it (change.Controller.Write).
	_, err = s.ctl.Write(r.Context(), func(doc *config.Document) error {
		if !present {
			header = ""
		}
		if _, err := proxyAt(doc, name, header); err != nil {
			return err
		}
		doc.Proxies = slices.DeleteFunc(doc.Proxies, func(p config.Proxy) bool { return string(p.Name) == name })
		return nil
	})
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
