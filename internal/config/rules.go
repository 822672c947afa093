package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Validate applies the cross-field rules to a normalised document and
// returns every violation, in document order. Rule numbers are the
// reference implementation's, so a message can be looked up; what a single
// value can decide is refused by its type while parsing instead.
func Validate(d *Document) []Violation {
	var vs []Violation
	add := func(rule, path, format string, args ...any) {
		vs = append(vs, Violation{Rule: rule, Path: path, Message: fmt.Sprintf(format, args...)})
	}

	// V1: the two listeners cannot share a port.
	if d.Server.Port != 0 && d.Server.Port == d.Admin.Port {
		add("V1", "admin.port", "must differ from server.port (both are %d)", d.Admin.Port)
	}
	if e := d.Server.ExternalURL; e != nil && e.IsTemplate() {
		vs = append(vs, checkTemplate("server.external_url", e.String())...)
	}
	vs = append(vs, validateTLS(d.Server.TLS)...)
	vs = append(vs, validateToxiproxy(d)...)

	vs = append(vs, validateListens(d)...)
	vs = append(vs, validateTokens(d)...)
	vs = append(vs, validateAccess(d)...)

	names := map[ProxyName]int{}
	firstDefault := -1
	for i, p := range d.Proxies {
		at := fmt.Sprintf("proxies[%d]", i)
		// V6: proxy names are unique; reported at the later entry.
		if j, dup := names[p.Name]; dup {
			add("V6", at+".name", "duplicate proxy name %s (first used by proxies[%d])", quote(string(p.Name)), j)
		} else {
			names[p.Name] = i
		}
		switch p.ResolveType() {
		case ResolveDefault:
			// V10: at most one default proxy.
			if firstDefault >= 0 {
				add("V10", at+".resolve", "only one proxy may use `type: default`, and proxies[%d] (%s) already does; give this one `type: header`",
					firstDefault, d.Proxies[firstDefault].Name)
			} else {
				firstDefault = i
			}
		}
		for _, v := range validateProxy(at, p) {
			vs = append(vs, nameProxy(string(p.Name), v))
		}
	}
	return vs
}

// nameProxy makes a violation inside a proxy name it, as 1.1's do
// (“proxy `alpha`: ...“, SPEC §19.2), its path unchanged; a message that
// names it already is left as it is.
func nameProxy(name string, v Violation) Violation {
	if named := "proxy " + quote(name); name != "" && !strings.Contains(v.Message, named) {
		v.Message = named + ": " + v.Message
	}
	return v
}

// validateProxy is the rules that read one proxy alone, its paths under at.
func validateProxy(at string, p Proxy) []Violation {
	var vs []Violation
	// V11: a header resolver names its header.
	vs = append(vs, validateTCP(at, p)...)
	if p.Resolve != nil && p.Resolve.Type == ResolveHeader && p.Resolve.Header == "" {
		vs = append(vs, Violation{Rule: "V11", Path: joinPath(at, "resolve.header"), Message: "`header` is required when `type: header`"})
	}
	return append(vs, validateFaultsAndMocks(at, p)...)
}

// validateFaultsAndMocks are the rules on a proxy's faults and mocks, which
// a session's overlay obeys too.
func validateFaultsAndMocks(at string, p Proxy) []Violation {
	vs := validateFaults("", at, p.Latency)
	vs = append(vs, validateAbort(at, p.Abort)...)
	vs = append(vs, validateWhens(at, p.Faults())...)
	return append(vs, validateMocks(at, p)...)
}

// validateFaults is V14 on the proxy and, through V25, on a mock's own block.
func validateFaults(rule, at string, l *Latency) []Violation {
	if l == nil || l.Min <= l.Max {
		return nil
	}
	if rule == "" {
		rule = "V14"
	}
	return []Violation{{Rule: rule, Path: joinPath(at, "latency.min"), Message: fmt.Sprintf("min must be <= max: min is %v s, max is %v s", float64(l.Min), float64(l.Max))}}
}

func validateMocks(at string, p Proxy) []Violation {
	var vs []Violation
	add := func(rule, path, format string, args ...any) {
		vs = append(vs, Violation{Rule: rule, Path: path, Message: fmt.Sprintf(format, args...)})
	}
	seen := map[Name]int{}
	for j, m := range p.Mocks {
		mat := joinPath(at, fmt.Sprintf("mocks[%d]", j))
		// V16: mock names are unique within a proxy.
		if k, dup := seen[m.Name]; dup {
			add("V16", mat+".name", "duplicate mock name %s (first used by %s)", quote(string(m.Name)), joinPath(at, fmt.Sprintf("mocks[%d]", k)))
		} else {
			seen[m.Name] = j
		}
		// V19: a declared variable does not shadow a capture group.
		groups := m.Request.URL.Groups()
		for _, v := range m.Request.Declared() {
			if slices.Contains(groups, v.Name) {
				add("V19", fmt.Sprintf("%s.request.%s.%s", mat, v.Source, v.Name),
					"variable %s collides with a capture group in request.url of the same name; rename one of them", quote(v.Name))
			}
		}
		r := m.Response
		var bodies []string
		if r.Body != nil {
			bodies = append(bodies, "body")
		}
		if r.JSON != nil {
			bodies = append(bodies, "json")
		}
		if r.Template != nil {
			bodies = append(bodies, "template")
		}
		// V20: at most one body source.
		if len(bodies) > 1 {
			add("V20", mat+".response", "at most one of `body`, `json`, `template` may be set, found %s", strings.Join(bodies, " and "))
		}
		// V30: 204 and 304 carry no body.
		if (r.Status == 204 || r.Status == 304) && len(bodies) > 0 {
			add("V30", mat+".response", "status %d forbids a body, but %s is set", r.Status, bodies[0])
		}
		// V21: every inline template parses. What it reads that nothing
		// binds is V22, an advisory (templateAdvisories).
		check := func(path, src string) { vs = append(vs, checkTemplate(path, src)...) }
		for _, t := range []struct {
			key string
			src *Template
		}{{"body", r.Body}, {"json", r.JSON}} {
			if t.src != nil {
				check(mat+".response."+t.key, string(*t.src))
			}
		}
		for _, h := range slices.Sorted(maps.Keys(r.Headers)) {
			check(mat+".response.headers."+string(h), string(r.Headers[h]))
		}
		// V25: a mock's own block obeys the proxy's rules.
		if m.Proxy != nil {
			vs = append(vs, validateFaults("V25", mat+".proxy", m.Proxy.Latency)...)
			vs = append(vs, validateAbort(mat+".proxy", m.Proxy.Abort)...)
			vs = append(vs, validateWhens(mat+".proxy", m.Proxy.Faults())...)
		}
	}
	return vs
}

// checkTemplate is V21: the template parses.
func checkTemplate(path, src string) []Violation {
	if TemplateEngine == nil {
		return nil
	}
	if _, err := TemplateEngine(src, nil); err != nil {
		return []Violation{{Rule: "V21", Path: path, Message: fmt.Sprintf("`%s` is not a valid template: it does not parse: %v", templateField(path), err)}}
	}
	return nil
}

// templateField is the key a template sits under, for the message:
// "json" for response.json, "X-Id" for response.headers.X-Id.
func templateField(path string) string {
	return path[strings.LastIndex(path, ".")+1:]
}

// mockVariables are the names a mock's templates can read: its capture
// groups, its declared header, query and body variables, and the system
// variables, sorted.
func mockVariables(m Mock) []string {
	vars := slices.Clone(SystemVariables)
	for _, g := range m.Request.URL.Groups() {
		if g != "" {
			vars = append(vars, g)
		}
	}
	for _, v := range m.Request.Declared() {
		vars = append(vars, v.Name)
	}
	slices.Sort(vars)
	return slices.Compact(vars)
}

func validateTokens(d *Document) []Violation {
	var vs []Violation
	names := map[Name]int{}
	values := map[Token]int{}
	for i, t := range d.Admin.Tokens {
		at := fmt.Sprintf("admin.tokens[%d]", i)
		// V26: token names and token values are each unique.
		if j, dup := names[t.Name]; dup {
			vs = append(vs, Violation{Rule: "V26", Path: at + ".name",
				Message: fmt.Sprintf("duplicate token name %s (first used by admin.tokens[%d])", quote(string(t.Name)), j)})
		} else {
			names[t.Name] = i
		}
		// The value is a secret: the message names only where it was seen.
		if j, dup := values[t.Token]; dup {
			vs = append(vs, Violation{Rule: "V26", Path: at + ".token",
				Message: fmt.Sprintf("duplicate token value: this one is already used by admin.tokens[%d]; every token must be unique", j)})
		} else {
			values[t.Token] = i
		}
	}
	return vs
}

func validateAccess(d *Document) []Violation {
	a := &d.Admin
	known := map[Name]bool{GroupAdmin: true, GroupUser: true}
	for _, t := range a.Tokens {
		known[t.Name] = true
		known[t.Group] = true
	}
	public := a.IsPublic()
	allowed, anyName := allowedNames(a.Groups)

	var vs []Violation
	checkList := func(path string, act Action) {
		s := act.Subjects
		if s == nil {
			return
		}
		// V34: no write action is public by omission.
		if s.Public && act.IsWrite() && !public {
			vs = append(vs, Violation{Rule: "V34", Path: path,
				Message: fmt.Sprintf("`%s` must not be public: no configuration wants an unauthenticated caller rewriting the proxy set (name a token or a group, or set admin.public: true if that is really meant)", act.Name)})
		}
		for _, n := range s.Names {
			// V27: every name refers to something that exists.
			if !known[n] {
				vs = append(vs, Violation{Rule: "V27", Path: path,
					Message: fmt.Sprintf("unknown token or group %s: it is neither a token name nor a group any token carries (admin and user always exist)", quote(string(n)))})
			}
			// V36: names are drawn from admin.groups.
			if !public && !anyName && n != GroupAdmin && !slices.Contains(allowed, n) {
				vs = append(vs, Violation{Rule: "V36", Path: path,
					Message: fmt.Sprintf("%s is not an allowed group; %s may name only %s", quote(string(n)), accessOwner(path), allowedList(allowed))})
			}
		}
	}
	for _, act := range a.Access.Actions() {
		checkList("admin.access."+act.Name, act)
	}
	for i, p := range d.Proxies {
		if p.Access == nil {
			continue
		}
		for _, act := range p.Access.Actions() {
			checkList(fmt.Sprintf("proxies[%d].access.%s", i, act.Name), act)
		}
	}
	return vs
}

func allowedNames(groups []AllowedGroup) (names []Name, any bool) {
	for _, g := range groups {
		if g == AnyGroup {
			return nil, true
		}
		names = append(names, Name(g))
	}
	return names, false
}

func accessOwner(path string) string {
	i := strings.LastIndex(path, ".")
	return "`" + path[:i] + "`"
}

func allowedList(allowed []Name) string {
	set := []string{string(GroupAdmin), KeywordPublic}
	for _, n := range allowed {
		if !slices.Contains(set, string(n)) {
			set = append(set, string(n))
		}
	}
	slices.Sort(set)
	for i, s := range set {
		set[i] = "`" + s + "`"
	}
	return strings.Join(set, ", ")
}
