// Package render turns a matched request into a mock's answer: it extracts
// the variables a mock declares, binds the system variables after them, and
// renders the response's templates strictly. It knows nothing of HTTP
// servers: its inputs are plain values, so it can be tested and benchmarked
// on its own.
package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/textproto"
	"net/url"
	"slices"
	"strings"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/jinja"
	"github.com/nikolalohinski/gonja/v2/exec"
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
	queryVar  []selectorVar
	bodyVar   []selectorVar

	kind        bodyKind
	inline      *jinja.Template
	file        string
	contentType string // the default; a response header may override it
	headers     []headerTemplate
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

type headerTemplate struct {
	name string
	tpl  *jinja.Template
}

// Compile builds a Mock from its configuration. Templates were checked by
// rule V21; a failure here means the document skipped validation.
func Compile(m *config.Mock) (*Mock, error) {
	c := &Mock{
		Name:   string(m.Name),
		Status: int(m.Response.Status),
		groups: m.Request.URL.Regexp().SubexpNames(),
	}
	for _, name := range sortedKeys(m.Request.Headers) {
		c.headerVar = append(c.headerVar, headerVar{name, textproto.CanonicalMIMEHeaderKey(string(m.Request.Headers[name]))})
	}
	for _, name := range sortedKeys(m.Request.Query) {
		c.queryVar = append(c.queryVar, selectorVar{name, m.Request.Query[name].Keys()})
	}
	for _, name := range sortedKeys(m.Request.Body) {
		c.bodyVar = append(c.bodyVar, selectorVar{name, m.Request.Body[name].Keys()})
	}
	r := &m.Response
	var err error
	switch {
	case r.Body != nil:
		c.kind, c.contentType = bodyText, "text/plain; charset=utf-8"
		c.inline, err = jinja.Compile(string(*r.Body))
	case r.JSON != nil:
		c.kind, c.contentType = bodyJSON, "application/json"
		c.inline, err = jinja.Compile(string(*r.JSON))
	case r.Template != nil:
		c.kind, c.file = bodyFile, string(*r.Template)
		c.contentType = contentTypeOf(c.file)
	}
	if err != nil {
		return nil, fmt.Errorf("mock %s: %w", m.Name, err)
	}
	for _, name := range sortedKeys(r.Headers) {
		t, err := jinja.Compile(string(r.Headers[name]))
		if err != nil {
			return nil, fmt.Errorf("mock %s: header %s: %w", m.Name, name, err)
		}
		c.headers = append(c.headers, headerTemplate{textproto.CanonicalMIMEHeaderKey(string(name)), t})
	}
	return c, nil
}

// ReadsBody reports whether the mock needs the request body buffered.
func (m *Mock) ReadsBody() bool { return len(m.bodyVar) > 0 }

// System are the nine variables Doppel binds into every render, after the
// user's own. All are always defined.
type System struct {
	ProxyName, MockName, Version, RequestID string
	Method, Path, Host, PeerIP, RealIP      string
}

// Input is what variables are extracted from.
type Input struct {
	Submatches []string            // of the mock's pattern against the path
	Header     map[string][]string // canonical keys, as net/http keeps them
	RawQuery   string
	Body       []byte // only when ReadsBody
}

// Variables extracts the mock's variables, then binds the system ones over
// them. A missing header, parameter or key binds nothing.
func (m *Mock) Variables(in *Input, sys *System) (map[string]any, error) {
	vars := make(map[string]any, len(m.groups)+len(m.headerVar)+len(m.queryVar)+len(m.bodyVar)+9)
	for i, name := range m.groups {
		if name != "" && i < len(in.Submatches) {
			vars[name] = in.Submatches[i]
		}
	}
	for _, h := range m.headerVar {
		if v := in.Header[h.header]; len(v) > 0 {
			vars[h.name] = v[0]
		}
	}
	if len(m.queryVar) > 0 {
		q, _ := url.ParseQuery(in.RawQuery) // what parses is used; the rest binds nothing
		for _, s := range m.queryVar {
			key := strings.Join(s.keys, ".")
			if v, ok := q[key]; ok && len(v) > 0 {
				vars[s.name] = v[0]
			}
		}
	}
	if len(m.bodyVar) > 0 {
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
			if v, ok := selectKeys(doc, s.keys); ok {
				vars[s.name] = jsonValue(v)
			}
		}
	}
	vars["proxy_name"] = sys.ProxyName
	vars["mock_name"] = sys.MockName
	vars["doppel_version"] = sys.Version
	vars["request_id"] = sys.RequestID
	vars["method"] = sys.Method
	vars["path"] = sys.Path
	vars["host"] = sys.Host
	vars["peer_ip"] = sys.PeerIP
	vars["real_ip"] = sys.RealIP
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
}

// Render renders the response with vars. files is where a template file is
// read from (at request time); proxy names its directory.
func (m *Mock) Render(vars map[string]any, files *Files, proxy string) (*Answer, error) {
	ctx := exec.NewContext(vars)
	a := &Answer{Status: m.Status}
	var body *jinja.Template
	switch m.kind {
	case bodyText, bodyJSON:
		body = m.inline
	case bodyFile:
		t, err := files.Template(proxy, m.file)
		if err != nil {
			return nil, err
		}
		body = t
	}
	if body != nil {
		out, err := body.ExecuteToBytes(ctx)
		if err != nil {
			return nil, fail(RenderFailed, "mock %s: %s", m.Name, reason(err))
		}
		if m.kind == bodyJSON && !json.Valid(out) {
			return nil, fail(RenderFailed, "mock %s: the json template rendered something that is not JSON", m.Name)
		}
		a.Body = out
	}
	contentType, explicit := m.contentType, false
	for _, h := range m.headers {
		v, err := h.tpl.ExecuteToString(ctx)
		if err != nil {
			return nil, fail(RenderFailed, "mock %s: header %s: %s", m.Name, h.name, reason(err))
		}
		if strings.ContainsAny(v, "\r\n") {
			return nil, fail(RenderFailed, "mock %s: header %s rendered a line break", m.Name, h.name)
		}
		if h.name == "Content-Type" {
			contentType, explicit = v, true
			continue
		}
		a.Headers = append(a.Headers, [2]string{h.name, v})
	}
	if explicit || (contentType != "" && a.Body != nil) {
		a.Headers = append([][2]string{{"Content-Type", contentType}}, a.Headers...)
	}
	return a, nil
}

// reason keeps gonja's message, which names the failing expression, on
// one line.
func reason(err error) string {
	msg := strings.TrimPrefix(err.Error(), "unable to execute template: ")
	return strings.Join(strings.Fields(msg), " ")
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
