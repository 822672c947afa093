package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// An Advisory is something legal but worth saying: serve logs it at warn,
// config validate prints it, and --strict refuses it as a violation.
type Advisory struct {
	Rule    string // "V22" for a variable nothing binds; "" for the rest
	Path    string
	Message string
}

// Violation is the advisory as --strict refuses it.
func (a Advisory) Violation() Violation {
	return Violation{Rule: a.Rule, Path: a.Path, Message: a.Message}
}

func (a Advisory) String() string {
	if a.Path == "" {
		return a.Message
	}
	return a.Path + ": " + a.Message
}

// SystemVariables are bound into every render after the user's own, so a
// user extraction into one of these names is read and discarded.
var SystemVariables = []string{
	"proxy_name", "mock_name", "doppel_version", "request_id",
	"method", "path", "host", "peer_ip", "real_ip",
}

// Advisories lists what serve logs at startup about a valid document.
// Computing them is pure; logging them is the caller's job. Template files
// are the caller's to look for (MissingTemplates).
func Advisories(d *Document) []Advisory {
	var as []Advisory
	add := func(path, format string, args ...any) {
		as = append(as, Advisory{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if e := d.Server.ExternalURL; e != nil && e.IsTemplate() {
		as = append(as, unbound("server.external_url", e.String(), SystemVariables)...)
	}
	if d.Server.Port != 0 && d.Server.Port < 1024 {
		add("server.port", "port %d is below 1024; binding it usually needs elevated privilege", d.Server.Port)
	}
	if *d.Admin.Enable && d.Admin.Port != 0 && d.Admin.Port < 1024 {
		add("admin.port", "port %d is below 1024; binding it usually needs elevated privilege", d.Admin.Port)
	}
	a := &d.Admin
	explicitPublic := a.Public != nil && *a.Public
	if explicitPublic {
		add("admin.public", "admin.public is true: the whole admin API is served unauthenticated, including the actions that rewrite the proxy set")
	} else if a.IsPublic() {
		add("admin.groups", "admin.groups is [], which names nobody: it is read as admin.public: true and the whole admin API is served unauthenticated")
	}
	if a.IsPublic() {
		var ignored []string
		if !accessIsDefault(&a.Access) {
			ignored = append(ignored, "admin.access")
		}
		if explicitPublic && !(len(a.Groups) == 1 && a.Groups[0] == AnyGroup) {
			ignored = append(ignored, "admin.groups")
		}
		for i, p := range d.Proxies {
			if p.Access != nil {
				ignored = append(ignored, fmt.Sprintf("proxies[%d].access", i))
			}
		}
		if len(ignored) > 0 {
			verb := "are"
			if len(ignored) == 1 {
				verb = "is"
			}
			add("", "%s %s ignored while the admin API is public; every action answers as `public` regardless",
				strings.Join(ignored, ", "), verb)
		}
	}
	if !a.IsPublic() {
		as = append(as, lockedOut("admin.access", a.Access.Actions(), "the whole admin API")...)
		for i, p := range d.Proxies {
			if p.Access != nil {
				as = append(as, lockedOut(fmt.Sprintf("proxies[%d].access", i), p.Access.Actions(), "this proxy and its journal entries")...)
			}
		}
	}
	for i, p := range d.Proxies {
		at := fmt.Sprintf("proxies[%d]", i)
		if p.URL != nil && p.URL.HasCredentials() {
			add(at+".url", "proxy %s has a username or password in its upstream url; the upstream URL carries credentials, and they are part of the proxy document the admin API returns to anyone who may read it", quote(string(p.Name)))
		}
		if p.Resolve != nil && p.Resolve.Type == ResolveDefault && p.Resolve.Header != "" {
			add(at+".resolve.header", "ignored: the proxy is the default, so no header selects it")
		}
		if p.Loss != nil {
			if msg := informationalAdvice(p.Loss.Status, true); msg != "" {
				add(at+".loss.status", "%s", msg)
			}
		}
		for j, m := range p.Mocks {
			mat := fmt.Sprintf("%s.mocks[%d]", at, j)
			as = append(as, templateAdvisories(mat, m)...)
			if msg := informationalAdvice(m.Response.Status, false); msg != "" {
				add(mat+".response.status", "%s", msg)
			}
			if m.Proxy != nil && m.Proxy.Loss != nil {
				if msg := informationalAdvice(m.Proxy.Loss.Status, true); msg != "" {
					add(mat+".proxy.loss.status", "%s", msg)
				}
			}
			// V40: a mock has no upstream whose work could happen first.
			if m.Proxy != nil && m.Proxy.Abort != nil && m.Proxy.Abort.At == AbortAtResponse {
				add(mat+".proxy.abort.at", "at: response on a mock acts as at: request (V40): a mock's answer has no upstream whose work happens first, so the connection is cut before anything is sent; write at: request to say so")
			}
			for _, v := range m.Request.Declared() {
				if slices.Contains(SystemVariables, v.Name) {
					add(fmt.Sprintf("%s.request.%s.%s", mat, v.Source, v.Name),
						"mock %s of proxy %s extracts %s into a name Doppel binds itself: %s is a system variable; the value extracted into it is discarded",
						quote(string(m.Name)), quote(string(p.Name)), quote(v.Name), quote(v.Name))
				}
			}
			for _, g := range m.Request.URL.Groups() {
				if slices.Contains(SystemVariables, g) {
					add(mat+".request.url",
						"mock %s of proxy %s captures %s into a name Doppel binds itself: capture group %s is a system variable; the value captured into it is discarded",
						quote(string(m.Name)), quote(string(p.Name)), quote(g), quote(g))
				}
			}
		}
	}
	return as
}

// informationalAdvice says what a client gets for a 1xx status, which HTTP
// never lets end an exchange, as a mock's answer or (lost) a dropped
// request's; it is "" for any other status. The proxy's exchange.WriteHeader
// makes it true: 101 is sent as the final answer and the connection closed,
// since no protocol follows it; any other 1xx goes out as an interim
// response and the answer then completes as 200.
func informationalAdvice(s Status, lost bool) string {
	switch {
	case s < 100 || s >= 200:
		return ""
	case s == 101 && lost:
		return "status 101 switches to no protocol: a dropped request gets 101 Switching Protocols with no body, then the connection is closed"
	case s == 101:
		return "status 101 switches to no protocol: the client gets 101 Switching Protocols with the mock's headers and no body, then the connection is closed"
	case lost:
		return fmt.Sprintf("status %d is informational and cannot end an exchange: a dropped request gets a %d interim response, then 200 OK with the LOSS_INJECTED envelope", s, s)
	default:
		return fmt.Sprintf("status %d is informational and cannot end an exchange: the client gets a %d interim response carrying the mock's headers, then 200 OK with those headers and the body", s, s)
	}
}

func accessIsDefault(a *Access) bool {
	def := AdminSubjects()
	for _, act := range a.Actions() {
		if act.Subjects != nil && (act.Subjects.Public || !slices.Equal(act.Subjects.Names, def.Names)) {
			return false
		}
	}
	return true
}

// lockedOut says of each action an override gives to a list without admin
// that the admin tokens lose it (SPEC §9.2: an override replaces the
// default, it does not add to it).
func lockedOut(at string, actions []Action, what string) []Advisory {
	var as []Advisory
	for _, act := range actions {
		if act.Subjects == nil || act.Subjects.Public || slices.Contains(act.Subjects.Names, GroupAdmin) {
			continue
		}
		names := make([]string, len(act.Subjects.Names))
		for i, n := range act.Subjects.Names {
			names[i] = string(n)
		}
		as = append(as, Advisory{Path: at + "." + act.Name, Message: fmt.Sprintf(
			"[%s] replaces the default [admin]: admin tokens are refused %s on %s (403) unless they are named here; write [%s, admin] to keep them",
			strings.Join(names, ", "), act.Name, what, strings.Join(names, ", "))})
	}
	return as
}

// templateAdvisories are V22 for one mock's inline templates: a variable
// that nothing binds fails every answer at request time with 500
// TEMPLATE_RENDER_ERROR (as in Doppel 1.1, which loads such a mock).
func templateAdvisories(mat string, m Mock) []Advisory {
	vars := mockVariables(m)
	r := m.Response
	var as []Advisory
	for _, t := range []struct {
		key string
		src *Template
	}{{"body", r.Body}, {"json", r.JSON}} {
		if t.src != nil {
			as = append(as, unbound(mat+".response."+t.key, string(*t.src), vars)...)
		}
	}
	for _, h := range slices.Sorted(maps.Keys(r.Headers)) {
		as = append(as, unbound(mat+".response.headers."+string(h), string(r.Headers[h]), vars)...)
	}
	return as
}

// unbound is V22 for one template: each variable it reads that none of
// vars binds. A template that does not parse is V21's to say.
func unbound(path, src string, vars []string) []Advisory {
	if TemplateEngine == nil {
		return nil
	}
	reads, err := TemplateEngine(src, func(n string) bool { return slices.Contains(vars, n) })
	if err != nil {
		return nil
	}
	var as []Advisory
	for _, u := range reads {
		as = append(as, Advisory{Rule: "V22", Path: path, Message: fmt.Sprintf(
			"the template reads %s (line %d, column %d), which nothing binds, so every answer fails with 500 TEMPLATE_RENDER_ERROR; "+
				"the variables here are %s; write {{ %s | default('') }} if it may be missing",
			quote(u.Name), u.Line, u.Column, strings.Join(vars, ", "), u.Name)})
	}
	return as
}

// MissingTemplates are the mocks whose template file has names that has
// does not find (has reports whether proxy's file exists, in templates.dir
// or the database's templates). The mock loads, as in Doppel 1.1: the
// file may be uploaded later; until then the mock answers 500.
func MissingTemplates(d *Document, has func(proxy, file string) bool) []Advisory {
	var as []Advisory
	for i, p := range d.Proxies {
		for j, m := range p.Mocks {
			if m.Response.Template == nil {
				continue
			}
			file := string(*m.Response.Template)
			if !has(string(p.Name), file) {
				as = append(as, Advisory{Path: fmt.Sprintf("proxies[%d].mocks[%d].response.template", i, j), Message: fmt.Sprintf(
					"the template file %s/%s is not in templates.dir (%s): the mock answers 500 TEMPLATE_NOT_FOUND until it is uploaded (PUT /api/v1/proxies/%s/templates/%s) or written there",
					p.Name, file, d.Templates.Dir, p.Name, file)})
			}
		}
	}
	return as
}
