package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/change"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/store"
)

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	p, ok := s.readable(w, r)
	if !ok {
		return
	}
	files, err := s.ctl.Templates(r.Context(), string(p.Name))
	if err != nil {
		apierr.Write(w, apierr.StoreError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templates": files})
}

// uploadTemplate checks, in order and before reading the body: the file
// name is safe; a mock of that proxy names it; then the body fits.
func (s *Server) uploadTemplate(w http.ResponseWriter, r *http.Request) {
	p, name, file, ok := s.templateTarget(w, r)
	if !ok {
		return
	}
	if !p.Declares(file) {
		apierr.Write(w, apierr.TemplateNotDeclared, "no mock of proxy "+name+" names "+file+" in response.template")
		return
	}
	limit := int64(s.ctl.Runtime().Document.Admin.Upload.Limit)
	if r.ContentLength > limit {
		apierr.Write(w, apierr.UploadTooLarge, fmt.Sprintf("a template file is at most %d bytes (admin.upload.limit)", limit))
		return
	}
	content, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		apierr.Write(w, apierr.ConfigInvalid, "the body could not be read: "+err.Error())
		return
	}
	if int64(len(content)) > limit {
		apierr.Write(w, apierr.UploadTooLarge, fmt.Sprintf("a template file is at most %d bytes (admin.upload.limit)", limit))
		return
	}
	// Checked again under the change lock: a write may have renamed the
	// proxy or dropped the mock while the body came in.
	switch err := s.ctl.WriteTemplate(r.Context(), name, file, content); {
	case errors.Is(err, change.ErrNoSuchProxy):
		apierr.Write(w, apierr.NotFound, "proxy "+name+" does not exist")
		return
	case errors.Is(err, change.ErrNotDeclared):
		apierr.Write(w, apierr.TemplateNotDeclared, "no mock of proxy "+name+" names "+file+" in response.template")
		return
	case err != nil:
		apierr.Write(w, apierr.StoreError, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// templateTarget is what both template-file writes check first, in this
// order: the right to upload, a safe file name, a proxy that exists.
func (s *Server) templateTarget(w http.ResponseWriter, r *http.Request) (*config.Proxy, string, string, bool) {
	name, file := r.PathValue("name"), r.PathValue("file")
	p := s.inForce(name)
	if !s.authorize(w, r, ActUpload, p) {
		return nil, "", "", false
	}
	if err := config.CheckTemplateName(file); err != nil {
		apierr.Write(w, apierr.ConfigInvalid, err.Error())
		return nil, "", "", false
	}
	if p == nil {
		apierr.Write(w, apierr.NotFound, "proxy "+name+" does not exist")
		return nil, "", "", false
	}
	return p, name, file, true
}

func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	_, name, file, ok := s.templateTarget(w, r)
	if !ok {
		return
	}
	err := s.ctl.DeleteTemplate(r.Context(), name, file)
	switch {
	case errors.Is(err, store.ErrNotFound):
		apierr.Write(w, apierr.NotFound, "template file "+file+" of proxy "+name+" does not exist")
	case err != nil:
		apierr.Write(w, apierr.StoreError, err.Error())
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, ActUpdate, nil) {
		return
	}
	res, err := s.ctl.Reload(r.Context())
	if err != nil {
		var inv *config.Invalid
		if errors.As(err, &inv) {
			apierr.Write(w, apierr.ConfigInvalid, "reload rejected, the running configuration is unchanged:\n"+strings.Join(inv.Lines(), "\n"))
			return
		}
		apierr.Write(w, apierr.StoreError, "reload failed, the running configuration is unchanged: "+err.Error())
		return
	}
	proxies, tcp := res.Runtime.ProxyCount()
	out := map[string]any{"revision": res.Runtime.Revision, "proxies": proxies, "tcp_proxies": tcp}
	if len(res.Unapplied) > 0 {
		out["unapplied"] = res.Unapplied
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	rt := s.ctl.Runtime()
	type proxyStatus struct {
		Name     string `json:"name"`
		Upstream string `json:"upstream"`
		Resolve  string `json:"resolve"`
		Mocks    int    `json:"mocks"`
	}
	proxies := []proxyStatus{}
	for _, p := range rt.Proxies {
		resolve := "default"
		if p.Config.Resolve.Type == config.ResolveHeader {
			resolve = "header:" + string(p.Config.Resolve.Header)
		}
		proxies = append(proxies, proxyStatus{p.Name, p.Config.URL.Redacted(), resolve, len(p.Mocks)})
	}
	for _, p := range rt.Document.Proxies {
		if p.Type == config.KindTCP {
			proxies = append(proxies, proxyStatus{string(p.Name), "tcp://" + p.Upstream.String(), "listen:" + p.Listen.String(), 0})
		}
	}
	out := map[string]any{
		"uptime_seconds": int64(time.Since(s.started).Seconds()),
		"revision":       rt.Revision,
		"seeded":         s.Seeded,
		"proxies":        proxies,
		"replica":        s.Fleet.Self().ID,
	}
	// As the last heartbeat found it: a status never waits for the
	// database.
	if live, lost, err := s.Fleet.Counts(); err != nil {
		out["fleet"] = map[string]any{"error": err.Error()}
	} else {
		out["fleet"] = map[string]any{"live": live, "lost": lost}
	}
	writeJSON(w, http.StatusOK, out)
}

// fleetTimeout bounds a read of the registry by the admin API.
const fleetTimeout = 2 * time.Second

// replicas lists the fleet.
func (s *Server) replicas(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), fleetTimeout)
	defer cancel()
	rs, err := s.Fleet.List(ctx)
	if err != nil {
		apierr.Write(w, apierr.StoreError, "cannot read the registry of replicas: "+err.Error())
		return
	}
	for i := range rs {
		if rs[i].Self { // what it serves now, not at its last heartbeat
			rs[i].Revision = string(s.ctl.Runtime().Revision)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"replicas": rs})
}

func (s *Server) schema(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/schema+json")
	_, _ = w.Write(config.Schema())
}

// access tells the caller what it may do, with the same decision function
// the endpoints use.
func (s *Server) access(w http.ResponseWriter, r *http.Request) {
	doc, c := s.policy(r)
	caller := map[string]any{"kind": "anonymous"}
	if !c.Anonymous {
		caller = map[string]any{"kind": "token", "name": c.Name, "group": c.Group}
	}
	global := map[Action]bool{}
	for _, a := range actions {
		global[a] = allowed(doc, c, a, nil)
	}
	out := map[string]any{"caller": caller, "global": global}
	if global[ActList] {
		proxies := map[string]map[Action]bool{}
		for i := range doc.Proxies {
			p := &doc.Proxies[i]
			proxies[string(p.Name)] = map[Action]bool{
				ActRead: allowed(doc, c, ActRead, p), ActUpdate: allowed(doc, c, ActUpdate, p),
				ActDelete: allowed(doc, c, ActDelete, p), ActUpload: allowed(doc, c, ActUpload, p),
			}
		}
		out["proxies"] = proxies
	}
	writeJSON(w, http.StatusOK, out)
}
