package config

import (
	"encoding/json"
	"reflect"
)

// The JSON Schema (2020-12) of the document is generated from the Go types
// above: struct tags give keys, required keys and descriptions, and each
// value type describes itself (pattern, bounds, enum) with a schema method.
// So the schema cannot describe a field that does not exist.

type schemaDescriber interface {
	jsonSchema() map[string]any
}

var describerType = reflect.TypeFor[schemaDescriber]()

// Schema returns the document's JSON Schema as indented JSON with a final
// newline; keys are sorted, so the output is stable.
func Schema() []byte {
	g := &schemaGen{defs: map[string]any{}}
	root := g.structSchema(reflect.TypeFor[Document]())
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["title"] = "Doppel configuration"
	root["description"] = "The YAML document Doppel reads. Generated from the Go types by `doppel config schema`; do not edit by hand."
	root["$defs"] = g.defs
	b, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		panic(err) // only maps, strings, numbers and bools: cannot fail
	}
	return append(b, '\n')
}

// SessionSchemaDefs are the schemas of a session's body (SPEC §17.5), by
// name, with references among them as in Schema: Session, SessionProxy
// and what they use.
func SessionSchemaDefs() []byte {
	g := &schemaGen{defs: map[string]any{}}
	g.typeSchema(reflect.TypeFor[Session]())
	b, err := json.Marshal(map[string]any{"$defs": g.defs})
	if err != nil {
		panic(err)
	}
	return b
}

type schemaGen struct {
	defs map[string]any
}

// defNames are 1.1's names for the $defs whose Go type is named otherwise,
// so that a reference written against 1.1's schema
// (`#/$defs/ProxyConfig`) finds its definition here. Types 1.1 does not
// have keep their Go name.
var defNames = map[string]string{
	"Access":       "AccessConfig",
	"Admin":        "AdminConfig",
	"Auth":         "AuthConfig",
	"Control":      "ControlConfig",
	"ExternalURL":  "ExternalUrl",
	"Latency":      "LatencyConfig",
	"Logging":      "LoggingConfig",
	"Loss":         "LossConfig",
	"Method":       "HttpMethod",
	"Mock":         "MockConfig",
	"MockOverride": "MockProxyOverride",
	"Proxy":        "ProxyConfig",
	"ProxyAccess":  "ProxyAccessConfig",
	"Resolve":      "ResolveConfig",
	"Sentry":       "SentryConfig",
	"Server":       "ServerConfig",
	"Status":       "HttpStatus",
	"Templates":    "TemplatesConfig",
	"Timeout":      "TimeoutSeconds",
	"Title":        "AdminTitle",
	"TokenEntry":   "TokenConfig",
	"Upload":       "UploadConfig",
	"UpstreamURL":  "UpstreamUrl",
}

// defName is the $defs name of a type: 1.1's where it has one.
func defName(t reflect.Type) string {
	if n, ok := defNames[t.Name()]; ok {
		return n
	}
	return t.Name()
}

func (g *schemaGen) typeSchema(t reflect.Type) map[string]any {
	if t.Kind() == reflect.Pointer {
		return g.typeSchema(t.Elem())
	}
	if t.Implements(describerType) {
		name := defName(t)
		if _, done := g.defs[name]; !done {
			g.defs[name] = reflect.Zero(t).Interface().(schemaDescriber).jsonSchema()
		}
		return map[string]any{"$ref": "#/$defs/" + name}
	}
	switch t.Kind() {
	case reflect.Struct:
		name := defName(t)
		if _, done := g.defs[name]; !done {
			g.defs[name] = nil // reserve: a struct may refer to itself
			g.defs[name] = g.structSchema(t)
		}
		return map[string]any{"$ref": "#/$defs/" + name}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.typeSchema(t.Elem())}
	case reflect.Map:
		s := map[string]any{"type": "object", "additionalProperties": g.typeSchema(t.Elem())}
		if t.Key().Implements(describerType) {
			s["propertyNames"] = g.typeSchema(t.Key())
		} else {
			s["propertyNames"] = map[string]any{"minLength": 1}
		}
		return s
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	}
	return map[string]any{"type": "string"}
}

func (g *schemaGen) structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	required := []string{}
	for i := range t.NumField() {
		f := t.Field(i)
		key := yamlKey(f)
		p := g.typeSchema(f.Type)
		prop := map[string]any{"description": f.Tag.Get("doc")}
		for k, v := range p {
			prop[k] = v
		}
		props[key] = prop
		if f.Tag.Get("required") == "true" {
			required = append(required, key)
		}
	}
	s := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func str(desc string, extra ...any) map[string]any {
	s := map[string]any{"type": "string", "description": desc}
	for i := 0; i+1 < len(extra); i += 2 {
		s[extra[i].(string)] = extra[i+1]
	}
	return s
}

func num(typ, desc string, min, max float64, example any) map[string]any {
	return map[string]any{"type": typ, "description": desc, "minimum": min, "maximum": max, "examples": []any{example}}
}

func (Name) jsonSchema() map[string]any {
	return str("Letters, digits, `-` and `_`, 2 to 64 characters. No dots.",
		"pattern", "^[A-Za-z0-9_-]{2,64}$", "minLength", 2, "maxLength", 64, "examples", []any{"billing-api"})
}

func (ProxyName) jsonSchema() map[string]any {
	return str("Letters, digits, `-` and `_`, 2 to 32 characters. No dots.",
		"pattern", "^[A-Za-z0-9_-]{2,32}$", "minLength", 2, "maxLength", 32, "examples", []any{"billing-api"})
}

func (Host) jsonSchema() map[string]any {
	return map[string]any{
		"type": "string", "description": "An IP address (IPv4 or IPv6), not a hostname.",
		"anyOf":    []any{map[string]any{"format": "ipv4"}, map[string]any{"format": "ipv6"}},
		"examples": []any{"127.0.0.1", "0.0.0.0", "::"},
	}
}

func (Port) jsonSchema() map[string]any {
	return num("integer", "A TCP port, 1 to 65535. 0 is refused: it would mean any free port.", 1, 65535, 8080)
}

func (Ratio) jsonSchema() map[string]any {
	return num("number", "A share written as a fraction from 0.0 to 1.0: 0.1 is one in ten, and 50 is refused, not read as 50%.", 0, 1, 0.25)
}

func (Seconds) jsonSchema() map[string]any {
	return num("number", "Seconds, 0 to 300; fractions allowed.", 0, maxSeconds, 0.25)
}

func (Timeout) jsonSchema() map[string]any {
	return num("integer", "Whole seconds, 1 to 3600.", 1, 3600, 30)
}

func (ByteSize) jsonSchema() map[string]any {
	return map[string]any{
		"description": "A byte count from 1 byte to 1 GiB: a plain integer, or a number with B, Ki, Mi, Gi, KiB, MiB, GiB (1024-based) or kB, MB, GB (1000-based), in any case. A bare K, M or G is refused as ambiguous. Written back as an integer.",
		"oneOf": []any{
			map[string]any{"type": "integer", "minimum": 1, "maximum": maxByteSize},
			map[string]any{"type": "string", "pattern": "^ *[0-9]+ *([bB]|[kKmMgG][iI][bB]?|[kKmMgG][bB])? *$"},
		},
		"examples": []any{1048576, "1Mi", "512kB"},
	}
}

func (HeaderName) jsonSchema() map[string]any {
	return str("An HTTP header name: a non-empty RFC 9110 token. Case is kept; matching ignores it.",
		"pattern", "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$", "minLength", 1, "examples", []any{"X-Request-ID"})
}

func (HeaderValue) jsonSchema() map[string]any {
	return str("An HTTP header value: visible ASCII, space and tab; no line breaks.",
		"pattern", "^[\\t -~]*$", "examples", []any{"Bearer 1234567890"})
}

func (Token) jsonSchema() map[string]any {
	return str("An admin token: printable ASCII without spaces, 32 to 255 characters. A UUID v4 is the recommended shape.",
		"pattern", "^[!-~]+$", "minLength", 32, "maxLength", 255, "examples", []any{"c0a721e2-90ff-40f0-a230-c1ab83d751d8"})
}

func (Method) jsonSchema() map[string]any {
	enum := make([]any, len(Methods))
	for i, m := range Methods {
		enum[i] = m
	}
	return str("An HTTP method in upper case, matched exactly.", "enum", enum)
}

func (Status) jsonSchema() map[string]any {
	return num("integer", "The HTTP status of an answer Doppel gives itself, 100 to 599. A 1xx cannot end an exchange: 101 is sent without a body and the connection closed; any other 1xx is sent as an interim response, then the answer completes as 200.", 100, 599, 200)
}

func (Pattern) jsonSchema() map[string]any {
	return str("A regular expression (RE2 syntax) matched against the request path, unanchored. Named groups (?P<name>...) become template variables.",
		"format", "regex", "examples", []any{"^/pricing/(?P<id>[0-9]+)$"})
}

func (Selector) jsonSchema() map[string]any {
	return str("A leading dot then dot-separated keys, as in .content.items. No indexing: a selector reaching an array yields the array.",
		"pattern", "^\\.[^.\\[\\]]+(\\.[^.\\[\\]]+)*$", "examples", []any{".content.items"})
}

func (TemplateName) jsonSchema() map[string]any {
	return str("A template file name: one path component, no separators, no leading dot, no control characters, at most 200 bytes.",
		"pattern", "^[^./\\\\\\u0000-\\u001f\\u007f][^/\\\\\\u0000-\\u001f\\u007f]*$", "minLength", 1, "maxLength", 200,
		"examples", []any{"order.json.j2"})
}

func (UpstreamURL) jsonSchema() map[string]any {
	return str("An absolute http or https URL with no query string or fragment; it may carry user:password@. Treated as a directory: the request path is appended under it.",
		"format", "uri", "pattern", "^[hH][tT][tT][pP][sS]?://[^?#]+$", "examples", []any{"https://api.example.com/v2/"})
}

func (ExternalURL) jsonSchema() map[string]any {
	return str("An absolute http or https URL with no query string or fragment, or a Jinja2 template over the system variables that starts with a literal http:// or https://.",
		"pattern", "^https?://", "examples", []any{"https://doppel.example.com/", "http://{{ host }}/"})
}

func (Template) jsonSchema() map[string]any {
	return str("A Jinja2 template, compiled at load and rendered per request. Undefined variables are an error unless filtered through default.",
		"examples", []any{`{"id": "{{ id }}"}`})
}

func (Title) jsonSchema() map[string]any {
	return str("Up to 64 characters, no control characters.", "minLength", 1, "maxLength", 64, "pattern", "^[^\\u0000-\\u001f\\u007f]+$")
}

func (Path) jsonSchema() map[string]any {
	return str("A filesystem path.", "minLength", 1)
}

func enumOf(desc string, values []string) map[string]any {
	enum := make([]any, len(values))
	for i, v := range values {
		enum[i] = v
	}
	return str(desc, "enum", enum)
}

func (LogLevel) jsonSchema() map[string]any {
	return enumOf("The lowest level logged.", LogLevels)
}

func (LogFormat) jsonSchema() map[string]any {
	return enumOf("json for machines, text for a terminal.", LogFormats)
}

func (ResolveKind) jsonSchema() map[string]any {
	return enumOf("default or header.", []string{string(ResolveDefault), string(ResolveHeader)})
}

func (ProxyKind) jsonSchema() map[string]any {
	return enumOf("What a proxy forwards. Only http exists; tcp is refused as not implemented.", []string{string(KindHTTP)})
}

func (Subjects) jsonSchema() map[string]any {
	subject := map[string]any{"type": "string", "pattern": "^(public|[A-Za-z0-9_-]{2,64})$"}
	return map[string]any{
		"description": "Who may perform an action: `public`, one token or group name, or a list of them. An empty list means public.",
		"oneOf":       []any{subject, map[string]any{"type": "array", "items": subject}},
		"examples":    []any{"public", []any{"admin", "ci"}},
	}
}

func (AllowedGroup) jsonSchema() map[string]any {
	return str("A token or group name access lists may use, or * for any.",
		"pattern", "^(\\*|[A-Za-z0-9_-]{2,64})$", "examples", []any{"*", "ci"})
}
