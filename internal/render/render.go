// Package render turns a matched request into a mock's answer: it extracts
// the variables a mock declares, binds the system variables after them, and
// renders the response's templates strictly. It knows nothing of HTTP
// servers: its inputs are plain values, so it can be tested and benchmarked
// on its own.
package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/textproto"
	"net/url"
	"slices"
	"strings"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/jinja"
	"github.com/doppelproxy/doppel/internal/version"
)

// ErrorKind says which of the mock errors an Error is.
type ErrorKind uint8

const (
	// RenderFailed: an undefined variable, a bad filter, invalid JSON.
	RenderFailed ErrorKind = iota + 1
	// TemplateMissing: the template file is not on disk.
	TemplateMissing
	// BodyNotJSON: body selectors were declared and the body is not JSON.
	BodyNotJSON
	// BudgetExhausted: the renders under way hold the process-wide
	// rendering budget; the same request may render later.
	BudgetExhausted
)

// Error is a failure to answer from a mock.
type Error struct {
	Kind    ErrorKind
	Message string
}

func (e *Error) Error() string { return e.Message }

func fail(kind ErrorKind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Mock is a mock's extraction and response, compiled once at load.
type Mock struct {
	Name   string
	Status int

	groups    []string // capture group names by submatch index ("" unnamed)
	headerVar []headerVar
	queryVar  []queryVar
	bodyVar   []selectorVar

	kind        bodyKind
	inline      template
	file        string
	contentType string // the default; a response header may override it
	headers     []headerTemplate
	constant    [4]any              // proxy_name, mock_name, doppel_version, method
	names       map[string]struct{} // every name the inline templates hold
}

// mentions reports whether any template of the answer (file may be nil)
// can read a variable called name: only those are bound, which spares
// boxing values nobody reads.
func (m *Mock) mentions(file *jinja.Template, name string) bool {
	if _, ok := m.names[name]; ok {
		return true
	}
	return file != nil && file.Mentions(name)
}

type bodyKind uint8

const (
	bodyNone bodyKind = iota
	bodyText
	bodyJSON
	bodyFile
)

type headerVar struct{ name, header string }

type selectorVar struct {
	name string
	keys []string
}

// queryVar is a query selector: the parameter it names is its keys
// joined with dots (`.a.b` reads `a.b`), joined once, at load.
type queryVar struct{ name, param string }

type headerTemplate struct {
	name string
	tpl  template
}

// template is a compiled template, or the literal text of one that has no
// Jinja2 syntax at all, which needs no execution.
type template struct {
	tpl     *jinja.Template
	literal []byte
	text    string // literal, as a string
}

func compileTemplate(src string) (template, error) {
	if !strings.Contains(src, "{{") && !strings.Contains(src, "{%") && !strings.Contains(src, "{#") {
		return template{literal: []byte(src), text: src}, nil
	}
	t, err := jinja.Compile(src)
	return template{tpl: t}, err
}

func (t template) execute(vars *jinja.Vars) ([]byte, error) {
	if t.tpl == nil {
		return t.literal, nil
	}
	return t.tpl.ExecuteToBytes(vars)
}

func (t template) executeToString(vars *jinja.Vars) (string, error) {
	if t.tpl == nil {
		return t.text, nil
	}
	return t.tpl.ExecuteToString(vars)
}

// Compile builds a Mock of proxy from its configuration. Templates were
// checked by rule V21; a failure here means the document skipped
// validation.
func Compile(proxy string, m *config.Mock) (*Mock, error) {
	c := &Mock{
		Name:   string(m.Name),
		Status: int(m.Response.Status),
		groups: m.Request.URL.Regexp().SubexpNames(),
		// The system variables that cannot change between requests are
		// made interface values once, here, rather than per request.
		constant: [4]any{proxy, string(m.Name), version.Version, string(m.Request.Method)},
	}
	for _, name := range slices.Sorted(maps.Keys(m.Request.Headers)) {
		c.headerVar = append(c.headerVar, headerVar{name, textproto.CanonicalMIMEHeaderKey(string(m.Request.Headers[name]))})
	}
	for _, name := range slices.Sorted(maps.Keys(m.Request.Query)) {
		c.queryVar = append(c.queryVar, queryVar{name, strings.Join(m.Request.Query[name].Keys(), ".")})
	}
	for _, name := range slices.Sorted(maps.Keys(m.Request.Body)) {
		c.bodyVar = append(c.bodyVar, selectorVar{name, m.Request.Body[name].Keys()})
	}
	r := &m.Response
	var err error
	switch {
	case r.Body != nil:
		c.kind, c.contentType = bodyText, "text/plain; charset=utf-8"
		c.inline, err = compileTemplate(string(*r.Body))
	case r.JSON != nil:
		c.kind, c.contentType = bodyJSON, "application/json"
		c.inline, err = compileTemplate(string(*r.JSON))
	case r.Template != nil:
		c.kind, c.file = bodyFile, string(*r.Template)
		c.contentType = contentTypeOf(c.file)
	}
	if err != nil {
		return nil, fmt.Errorf("mock %s: %w", m.Name, err)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Headers)) {
		t, err := compileTemplate(string(r.Headers[name]))
		if err != nil {
			return nil, fmt.Errorf("mock %s: header %s: %w", m.Name, name, err)
		}
		c.headers = append(c.headers, headerTemplate{textproto.CanonicalMIMEHeaderKey(string(name)), t})
	}
	c.inline = c.fold(c.inline)
	for i := range c.headers {
		c.headers[i].tpl = c.fold(c.headers[i].tpl)
	}
	c.names = map[string]struct{}{}
	for _, t := range append([]template{c.inline}, headerTemplates(c.headers)...) {
		if t.tpl != nil {
			t.tpl.AddNames(c.names)
		}
	}
	return c, nil
}

// constantNames are the system variables that are the same for every
// request a mock answers; constant holds their values in this order.
var constantNames = []string{"proxy_name", "mock_name", "doppel_version", "method"}

// fold renders at load a template whose output depends on nothing but
// constantNames (`mock {{ mock_name }}`), and sends it as a literal. A template that fails is kept, to fail the same way on
// each request.
func (c *Mock) fold(t template) template {
	if t.tpl == nil || !t.tpl.Constant(constantNames) {
		return t
	}
	vars := jinja.NewVars()
	for i, name := range constantNames {
		vars.Set(name, c.constant[i])
	}
	out, err := t.tpl.ExecuteToBytes(vars)
	if err != nil {
		return t
	}
	return template{literal: out, text: string(out)}
}

func headerTemplates(hs []headerTemplate) []template {
	out := make([]template, len(hs))
	for i, h := range hs {
		out[i] = h.tpl
	}
	return out
}

// ReadsBody reports whether the mock needs the request body buffered.
func (m *Mock) ReadsBody() bool { return len(m.bodyVar) > 0 }

// SystemVars binds the nine system variables alone, for templates that
// are not a mock's (a templated external_url).
func SystemVars(proxy, mock, method string, r *Request) *jinja.Vars {
	vars := jinja.NewVars()
	for _, kv := range [...]struct {
		name, value string
	}{
		{"proxy_name", proxy}, {"mock_name", mock}, {"doppel_version", version.Version},
		{"method", method}, {"request_id", r.RequestID}, {"path", r.Path},
		{"host", r.Host}, {"peer_ip", r.PeerIP}, {"real_ip", r.RealIP},
	} {
		vars.Set(kv.name, kv.value)
	}
	return vars
}

// Request are the system variables that vary per request. With the
// proxy's and the mock's names, the version and the method (which the mock
// matched exactly) they are the nine variables Doppel binds into every
// render, after the user's own. All are always defined.
type Request struct {
	RequestID, Path, Host, PeerIP, RealIP string
}

// Input is what variables are extracted from.
type Input struct {
	Submatches []string            // of the mock's pattern against the path
	Header     map[string][]string // canonical keys, as net/http keeps them
	RawQuery   string
	Body       []byte // only when ReadsBody
}

// Answer extracts the mock's variables, binds the system ones over them,
// and renders the response. files is where a template file is read from
// (at request time); proxy names its directory.
func (m *Mock) Answer(in *Input, sys *Request, files *Files, proxy string) (*Answer, error) {
	var file *jinja.Template
	if m.kind == bodyFile {
		t, err := files.Template(proxy, m.file)
		if err != nil {
			return nil, err
		}
		file = t
	}
	vars, err := m.variables(in, sys, file)
	if err != nil {
		return nil, err
	}
	return m.render(vars, file)
}

// variables extracts the mock's variables, then binds the system ones over
// them. A missing header, parameter or key binds nothing; a variable no
// template mentions is not bound at all.
func (m *Mock) variables(in *Input, sys *Request, file *jinja.Template) (*jinja.Vars, error) {
	vars := jinja.NewVars()
	// Typed, so that a value is made an interface (an allocation) only
	// when a template reads it.
	set := func(name string, value string) {
		if m.mentions(file, name) {
			vars.Set(name, value)
		}
	}
	setConstant := func(name string, value any) {
		if m.mentions(file, name) {
			vars.Set(name, value)
		}
	}
	for i, name := range m.groups {
		if name != "" && i < len(in.Submatches) && m.mentions(file, name) {
			vars.Set(name, in.Submatches[i])
		}
	}
	for _, h := range m.headerVar {
		if v := in.Header[h.header]; len(v) > 0 && m.mentions(file, h.name) {
			vars.Set(h.name, v[0])
		}
	}
	if len(m.queryVar) > 0 {
		q, _ := url.ParseQuery(in.RawQuery) // what parses is used; the rest binds nothing
		for _, s := range m.queryVar {
			if v, ok := q[s.param]; ok && len(v) > 0 {
				set(s.name, v[0])
			}
		}
	}
	// An empty body binds nothing, as in 1.1: its variables are undefined
	// (a `default` answers), rather than failing as a body not JSON.
	if len(m.bodyVar) > 0 && len(in.Body) > 0 {
		var doc any
		dec := json.NewDecoder(bytes.NewReader(in.Body))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return nil, fail(BodyNotJSON, "the request body is not JSON, but mock %s extracts from it: %v", m.Name, err)
		}
		if dec.More() {
			return nil, fail(BodyNotJSON, "the request body holds more than one JSON value, but mock %s extracts from it", m.Name)
		}
		for _, s := range m.bodyVar {
			if v, ok := selectKeys(doc, s.keys); ok && m.mentions(file, s.name) {
				vars.Set(s.name, jsonValue(v))
			}
		}
	}
	setConstant("proxy_name", m.constant[0])
	setConstant("mock_name", m.constant[1])
	setConstant("doppel_version", m.constant[2])
	setConstant("method", m.constant[3])
	set("request_id", sys.RequestID)
	set("path", sys.Path)
	set("host", sys.Host)
	set("peer_ip", sys.PeerIP)
	set("real_ip", sys.RealIP)
	return vars, nil
}

func selectKeys(v any, keys []string) (any, bool) {
	for _, k := range keys {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// jsonValue turns decoded numbers into ints or floats, so templates can do
// arithmetic and comparisons with them.
func jsonValue(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	case []any:
		for i := range t {
			t[i] = jsonValue(t[i])
		}
	case map[string]any:
		for k := range t {
			t[k] = jsonValue(t[k])
		}
	}
	return v
}

// Answer is a rendered response.
type Answer struct {
	Status  int
	Headers [][2]string // canonical names, in a fixed order; Content-Type first
	Body    []byte

	few [4][2]string // Headers, when they are few
}

// render renders the response with vars; file is the body's template
// when it comes from a file.
func (m *Mock) render(vars *jinja.Vars, file *jinja.Template) (*Answer, error) {
	// Content-Type, when there is one, goes first: its place is kept.
	a := &Answer{Status: m.Status}
	a.Headers = a.few[:1]
	if len(m.headers)+1 > len(a.few) {
		a.Headers = make([][2]string, 1, len(m.headers)+1)
	}
	body, hasBody := m.inline, m.kind != bodyNone
	if file != nil {
		body = template{tpl: file}
	}
	if hasBody {
		out, err := body.execute(vars)
		if err != nil {
			return nil, fail(kindOf(err), "mock %s: %s", m.Name, reason(err))
		}
		if m.kind == bodyJSON && !json.Valid(out) {
			return nil, fail(RenderFailed, "mock %s: the json template rendered successfully, but its output is not valid json", m.Name)
		}
		a.Body = out
	}
	contentType, explicit := m.contentType, false
	for _, h := range m.headers {
		v, err := h.tpl.executeToString(vars)
		if err != nil {
			return nil, fail(kindOf(err), "mock %s: header %s: %s", m.Name, h.name, reason(err))
		}
		if err := config.CheckHeaderValue(v); err != nil {
			return nil, fail(RenderFailed, "mock %s: header %s rendered an invalid value: %v", m.Name, h.name, err)
		}
		if h.name == "Content-Type" {
			contentType, explicit = v, true
			continue
		}
		a.Headers = append(a.Headers, [2]string{h.name, v})
	}
	if explicit || (contentType != "" && a.Body != nil) {
		a.Headers[0] = [2]string{"Content-Type", contentType}
	} else {
		a.Headers = a.Headers[1:]
	}
	return a, nil
}

// kindOf is the kind of a template's failure.
func kindOf(err error) ErrorKind {
	if errors.Is(err, jinja.ErrBudgetExhausted) {
		return BudgetExhausted
	}
	return RenderFailed
}

// reason keeps gonja's message, which names the failing expression, on
// one line.
func reason(err error) string {
	msg := strings.TrimPrefix(err.Error(), "unable to execute template: ")
	return strings.Join(strings.Fields(msg), " ")
}
