package config

import (
	"fmt"
	"slices"
	"strings"
)

// An Advisory is something legal but worth saying once at startup.
type Advisory struct {
	Path    string
	Message string
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

// Advisories lists what serve logs once at startup about a valid document.
// Computing them is pure; logging them is the caller's job.
func Advisories(d *Document) []Advisory {
	var as []Advisory
	add := func(path, format string, args ...any) {
		as = append(as, Advisory{Path: path, Message: fmt.Sprintf(format, args...)})
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
	for i, p := range d.Proxies {
		at := fmt.Sprintf("proxies[%d]", i)
		if p.URL != nil && p.URL.HasCredentials() {
			add(at+".url", "the upstream URL carries credentials; they are part of the proxy document the admin API returns to anyone who may read it")
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
						"%s is a system variable; the value extracted into it is discarded", quote(v.Name))
				}
			}
			for _, g := range m.Request.URL.Groups() {
				if slices.Contains(SystemVariables, g) {
					add(mat+".request.url",
						"capture group %s is a system variable; the value captured into it is discarded", quote(g))
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
