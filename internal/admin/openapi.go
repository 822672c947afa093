package admin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/version"
)

// GET /openapi.json is generated from the route table, so the document
// and the mux cannot disagree about what is served. What the table cannot
// hold is here: the schemas of the answers, the configuration's own
// schemas (taken from config.Schema, never restated), and what each
// error code means.

// api is what the document says of a route besides its method and path.
type api struct {
	// operationID names the operation in clients generated from the
	// document, so it is written here rather than derived, and kept once
	// published: camelCase, unique across the table.
	operationID  string
	tag, summary string
	about        string        // more, in Markdown; optional
	action       Action        // the action a caller needs; "" when anyone may call it
	headers      []string      // request headers it reads, from requestHeaders
	query        []string      // query parameters it reads, from queryParams
	body         bodyKind      // what the request body is
	ok           []reply       // the answers that are not errors
	codes        []apierr.Code // the error codes it answers; 401 and 403 follow from action
}

type bodyKind int

const (
	noBody          bodyKind = iota
	proxyCreateBody          // {"proxy": {...}}
	proxyUpdateBody          // {"revision", "proxy"}, or a bare proxy with If-Match
	rawBody                  // a file's bytes, as they are
	verifyBody               // a journal verification
	sessionBodyKind          // a session: {"ttl", "proxies": {...}}
	recordBodyKind           // a recording: {"revision", "match", "session", "since", "apply"}
)

// reply is one answer that is not an error.
type reply struct {
	status  int
	means   string
	media   []string // content types; application/json when empty and there is a schema
	schema  string   // a name in components/schemas or one of the two below; "" for no body
	headers []string // from responseHeaders
}

// Bodies with no schema of their own.
const (
	schemaObject = "(object)" // a JSON object: a schema, this document
	schemaText   = "(text)"   // a page, a script, a picture: a file as it is
)

// Tags group the operations, in this order.
const (
	tagProxies   = "proxies"
	tagTemplates = "templates"
	tagConfig    = "configuration"
	tagJournal   = "journal"
	tagSessions  = "sessions"
	tagDocs      = "documentation"
	tagDashboard = "dashboard"
)

var tags = []struct{ name, about string }{
	{tagProxies, "The proxy documents in force. Each has a revision: an update carries the one it is based on."},
	{tagTemplates, "The files a proxy's mocks name in `response.template`."},
	{tagConfig, "The running configuration as a whole, and what the caller may do."},
	{tagJournal, "The requests the proxy listener handled, kept in memory (`journal.size`), and verification of what a client did."},
	{tagSessions, "Overlays of mocks and faults in force only for requests carrying their id: parallel suites share one Doppel, each with its own faults."},
	{tagDocs, "This document and a browser UI over it. Outside `/api/`; no token needed."},
	{tagDashboard, "The browser dashboard, a client of the API above with the same token rules. Absent with `admin.dashboard: false`."},
}

// codeMeaning says when the admin API answers a code; every code a route
// lists needs one.
var codeMeaning = map[apierr.Code]string{
	apierr.ConfigInvalid:       "the request, or the document it carries, is malformed or breaks a rule; the message lists every violation, one per line",
	apierr.Unauthorized:        "no token, or an unknown one, and the action is not public",
	apierr.Forbidden:           "the token may not perform the action here (decided before whether the target exists)",
	apierr.NotFound:            "no such proxy or file",
	apierr.Conflict:            "the name is taken, or the store kept changing under the write (retries exhausted)",
	apierr.RevisionMismatch:    "the revision is not the current one: read again and reapply",
	apierr.RevisionRequired:    "no revision in `If-Match` or the body, or `If-Match: *`",
	apierr.UploadTooLarge:      "the body is over the limit: 1 MiB for a proxy document, `admin.upload.limit` for a file",
	apierr.TemplateNotDeclared: "no mock of the proxy names the file in `response.template`",
	apierr.StoreError:          "the store failed, or a change was stored but could not be put in force (a reload retries it)",
	apierr.VerificationFailed:  "a condition did not hold; the message says which, and the body adds `matched`, `gaps_ms`, the newest 100 matched `requests` and `requests_omitted`",
	apierr.TooManySubscribers:  "the caller has 16 streams of the journal open (a token's name counts, or the client's address when reads are public), or Doppel 256 in all; the message says which",
	apierr.ReplicaUnavailable:  "a live replica's journal could not be read (lost, no answer within 2 s, no fleet key); the message and `replicas.missing` name each, and `\"partial\": true` verifies what the others hold",
}

// filterQuery are the journal's filters.
var filterQuery = []string{"proxy", "mock", "method", "path", "session", "since", "limit"}

var queryParams = map[string]map[string]any{
	"proxy":   {"description": "Only this proxy's entries. Clearing: may be repeated.", "schema": map[string]any{"type": "string"}},
	"mock":    {"description": "Only the entries this mock answered.", "schema": map[string]any{"type": "string"}},
	"method":  {"description": "Only this method (any case).", "schema": map[string]any{"type": "string"}, "example": "POST"},
	"path":    {"description": "Only paths this regular expression matches (unanchored).", "schema": map[string]any{"type": "string"}, "example": "^/orders"},
	"session": {"description": "Only this session's: its entries, or its overlay's counters.", "schema": map[string]any{"type": "string"}},
	"since":   {"description": "Only entries after this one: an entry's `id`, or an RFC 3339 time (exclusive).", "schema": map[string]any{"type": "string"}},
	"limit":   {"description": "Only the newest this many (still oldest first), 1 to 10000; a list holds 1000 unless given, and counts the older ones that matched in `more`.", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 10000}},
	"local":   {"description": "With the PostgreSQL store, `true` reads the replica asked alone; by default every live replica's journal is read and merged by time, `since` and `limit` applying after the merge.", "schema": map[string]any{"type": "boolean"}},
}

// pathParams describes each {name} a pattern may hold.
var pathParams = map[string]func() map[string]any{
	"name": func() map[string]any {
		return map[string]any{"description": "The proxy's name.", "schema": ref("ProxyName")}
	},
	"id": func() map[string]any {
		return map[string]any{"description": "The session's id.", "schema": ref("SessionID")}
	},
	"file": func() map[string]any {
		return map[string]any{"description": "The template file's name; checked after percent-decoding.", "schema": ref("TemplateName")}
	},
	"resource": func() map[string]any {
		return map[string]any{"description": "A file of the dashboard, named `<name>-<10 hex digits of its SHA-256>.<ext>` as the page names it.",
			"schema": map[string]any{"type": "string", "pattern": `^[A-Za-z0-9_.-]+-[0-9a-f]{10}\.[a-z]+$`}}
	},
	"asset": func() map[string]any {
		return map[string]any{"description": "A file of the page.", "schema": map[string]any{"type": "string", "enum": swaggerAssets().names("")}}
	},
}

var requestHeaders = map[string]map[string]any{
	"If-Match": {
		"name": "If-Match", "in": "header",
		"description": "The revision the change is based on, `\"<hex>\"` or bare `<hex>`. `*` is not a revision (428).",
		"schema":      map[string]any{"type": "string"}, "example": `"3f1c2a9b8d7e6f50"`,
	},
}

var responseHeaders = map[string]map[string]any{
	"ETag":     {"description": "A proxy's revision, quoted: `\"<hex>\"`. For this document and the page's files, a weak tag of the content.", "schema": map[string]any{"type": "string"}},
	"Location": {"description": "Where the resource is: a path.", "schema": map[string]any{"type": "string"}},
}

// openAPIDocument is the document of routes. header is the one tokens
// travel in: admin.auth.header in force, which a reload may change.
func openAPIDocument(routes []route, header string) map[string]any {
	schemas := configSchemas()
	for name, s := range answerSchemas() {
		if _, taken := schemas[name]; taken {
			panic("the schema " + name + " is the configuration's already")
		}
		schemas[name] = s
	}
	var tagList []any
	for _, t := range tags {
		if slices.ContainsFunc(routes, func(rt route) bool { return rt.api.tag == t.name }) {
			tagList = append(tagList, map[string]any{"name": t.name, "description": t.about})
		}
	}
	paths := map[string]any{}
	for _, rt := range routes {
		item, _ := paths[rt.pattern].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[rt.pattern] = item
		}
		item[strings.ToLower(rt.method)] = operation(rt)
	}
	params := map[string]any{}
	for name, p := range requestHeaders {
		params[name] = p
	}
	headers := map[string]any{}
	for name, h := range responseHeaders {
		headers[name] = h
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "Doppel admin API",
			"version":     version.Version,
			"description": overview(header),
		},
		"tags":  tagList,
		"paths": paths,
		"components": map[string]any{
			"schemas":    schemas,
			"parameters": params,
			"headers":    headers,
			"securitySchemes": map[string]any{
				"token": map[string]any{
					"type": "apiKey", "in": "header", "name": header,
					"description": "`Bearer <token>` in `" + header + "` (`admin.auth.header`). Type the whole value, `Bearer ` included.",
				},
				"bearer": map[string]any{
					"type": "http", "scheme": "bearer",
					"description": "The same token in the standard `Authorization: Bearer <token>`; `" + header + "` wins when both are sent.",
				},
			},
		},
	}
	prune(doc)
	return doc
}

func overview(header string) string {
	return "Changes a running Doppel and reports on it. Every error Doppel answers is the envelope " +
		"`{\"status\": \"error\", \"message\", \"code\"}` (`Error`) with `Content-Type: application/json`. " +
		"An unknown path is `404 NOT_FOUND`; a known path with another method is `405 METHOD_NOT_ALLOWED` with `Allow`; " +
		"a trailing slash is accepted on every path.\n\n" +
		"A token travels in `" + header + "` as `Bearer <token>`. Which action needs which token is set by `admin.access` " +
		"(and a proxy's own `access`); every action defaults to the `admin` group, reads included. " +
		"A write is in force when it answers."
}

var paramPattern = regexp.MustCompile(`\{([a-z]+)\}`)

func operation(rt route) map[string]any {
	a := rt.api
	op := map[string]any{
		"operationId": a.operationID,
		"tags":        []string{a.tag},
		"summary":     a.summary,
		"responses":   responses(a),
	}
	if !slices.ContainsFunc(tags, func(t struct{ name, about string }) bool { return t.name == a.tag }) {
		panic("route " + rt.method + " " + rt.pattern + ": unknown tag " + a.tag)
	}
	about := a.about
	if a.action != "" {
		op["security"] = []any{map[string]any{"token": []string{}}, map[string]any{"bearer": []string{}}}
		op["x-doppel-action"] = string(a.action)
		about = strings.TrimSpace(about + "\n\nNeeds the `" + string(a.action) + "` action (`admin.access`; by default the `admin` group).")
	} else {
		about = strings.TrimSpace(about + "\n\nOpen to anyone: no token needed.")
	}
	op["description"] = about
	var params []any
	for _, m := range paramPattern.FindAllStringSubmatch(rt.pattern, -1) {
		describe, ok := pathParams[m[1]]
		if !ok {
			panic("route " + rt.method + " " + rt.pattern + ": undescribed path parameter " + m[1])
		}
		p := describe()
		p["name"], p["in"], p["required"] = m[1], "path", true
		params = append(params, p)
	}
	for _, q := range a.query {
		p, ok := queryParams[q]
		if !ok {
			panic("route " + rt.method + " " + rt.pattern + ": undescribed query parameter " + q)
		}
		param := map[string]any{"name": q, "in": "query"}
		for k, v := range p {
			param[k] = v
		}
		params = append(params, param)
	}
	for _, h := range a.headers {
		if _, ok := requestHeaders[h]; !ok {
			panic("route " + rt.method + " " + rt.pattern + ": undescribed header " + h)
		}
		params = append(params, map[string]any{"$ref": "#/components/parameters/" + h})
	}
	if params != nil {
		op["parameters"] = params
	}
	if body := requestBody(a.body); body != nil {
		op["requestBody"] = body
	}
	return op
}

var exampleProxy = map[string]any{
	"name": "billing-api", "type": "http", "url": "https://api.example.com/v2/",
	"resolve": map[string]any{"type": "header", "header": "X-Backend"},
}

func requestBody(kind bodyKind) map[string]any {
	switch kind {
	case proxyCreateBody:
		return map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{
			"schema": ref("ProxyCreate"), "example": map[string]any{"proxy": exampleProxy},
		}}}
	case proxyUpdateBody:
		return map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{
			"schema": ref("ProxyUpdate"), "example": map[string]any{"revision": "3f1c2a9b8d7e6f50", "proxy": exampleProxy},
		}}}
	case verifyBody:
		return map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{
			"schema": ref("Verification"), "example": map[string]any{
				"match":       map[string]any{"proxy": "billing-api", "method": "POST", "path": "^/charges$", "headers": map[string]any{"Idempotency-Key": "^k-1$"}},
				"count":       map[string]any{"min": 1, "max": 4},
				"gaps_ms":     map[string]any{"min": 100},
				"same_header": "Idempotency-Key",
			},
		}}}
	case sessionBodyKind:
		return map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{
			"schema": ref("Session"), "example": map[string]any{
				"ttl": 300, "proxies": map[string]any{"billing-api": map[string]any{
					"loss": map[string]any{"percentage": 1.0, "status": 503, "when": map[string]any{"count": map[string]any{"first": 2}, "per": map[string]any{"header": "Idempotency-Key"}}},
				}},
			},
		}}}
	case recordBodyKind:
		return map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{
			"schema": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
				"revision": map[string]any{"type": "string", "description": "The proxy's revision; required with apply true."},
				"match":    map[string]any{"type": "string", "description": "Only exchanges whose path this regular expression matches (unanchored)."},
				"session":  map[string]any{"type": "string", "description": "Only this session's exchanges."},
				"since":    map[string]any{"type": "string", "description": "Only exchanges after this RFC 3339 time or journal entry id."},
				"apply":    map[string]any{"type": "boolean", "description": "Append the mocks to the proxy (true) or only show them (false)."},
				"local":    map[string]any{"type": "boolean", "description": "With the PostgreSQL store, record from the journal of the replica asked alone; by default every live replica's exchanges are read, merged by time."},
			}},
			"example": map[string]any{"revision": "3f1c2a9b8d7e6f50", "match": "^/catalog", "apply": true},
		}}}
	case rawBody:
		return map[string]any{"required": true, "content": map[string]any{"application/octet-stream": map[string]any{
			"schema": map[string]any{"type": "string", "contentMediaType": "application/octet-stream"},
		}}}
	}
	return nil
}

func responses(a api) map[string]any {
	out := map[string]any{}
	for _, r := range a.ok {
		resp := map[string]any{"description": r.means}
		if r.schema != "" {
			media := r.media
			if len(media) == 0 {
				media = []string{"application/json"}
			}
			content := map[string]any{}
			for _, m := range media {
				content[m] = map[string]any{"schema": bodySchema(r.schema)}
			}
			resp["content"] = content
		}
		if len(r.headers) > 0 {
			hs := map[string]any{}
			for _, h := range r.headers {
				if _, ok := responseHeaders[h]; !ok {
					panic("undescribed response header " + h)
				}
				hs[h] = map[string]any{"$ref": "#/components/headers/" + h}
			}
			resp["headers"] = hs
		}
		out[strconv.Itoa(r.status)] = resp
	}
	codes := slices.Clone(a.codes)
	if a.action != "" {
		codes = append(codes, apierr.Unauthorized, apierr.Forbidden)
	}
	byStatus := map[int][]apierr.Code{}
	for _, c := range codes {
		byStatus[c.Status()] = append(byStatus[c.Status()], c)
	}
	for status, cs := range byStatus {
		slices.Sort(cs)
		var means []string
		enum := make([]any, len(cs))
		for i, c := range cs {
			m, ok := codeMeaning[c]
			if !ok {
				panic("no meaning for the code " + string(c))
			}
			means = append(means, "`"+string(c)+"`: "+m+".")
			enum[i] = string(c)
		}
		out[strconv.Itoa(status)] = map[string]any{
			"description": strings.Join(means, "\n\n"),
			"content": map[string]any{"application/json": map[string]any{
				"schema": map[string]any{
					"allOf": []any{ref("ErrorBody"), map[string]any{"properties": map[string]any{"code": map[string]any{"enum": enum}}}},
				},
				// Browser UIs build an example from the first code of Error's
				// enum, which is not this status's; give them the right one.
				"example": apierr.Envelope{Status: "error", Message: codeMeaning[cs[0]], Code: cs[0]},
			}},
		}
	}
	return out
}

func bodySchema(name string) map[string]any {
	switch name {
	case schemaObject:
		return map[string]any{"type": "object"}
	case schemaText:
		return map[string]any{"type": "string"}
	}
	return ref(name)
}

func ref(name string) map[string]any {
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// sessionSchema is a session as an answer shows it; proxies says how its
// proxies are shown.
func sessionSchema(proxies map[string]any) map[string]any {
	return object([]string{"id", "expires_at", "revision", "ttl", "proxies"}, map[string]any{
		"id":         ref("SessionID"),
		"expires_at": map[string]any{"type": "string", "format": "date-time"},
		"revision":   ref("Revision"),
		"ttl":        ref("SessionTTL"),
		"proxies":    proxies,
	})
}

// configSchemas are the configuration schema's $defs, their references
// pointed at components/schemas: OpenAPI 3.1 schemas are JSON Schema
// 2020-12, so they are used as they are.
func configSchemas() map[string]any {
	var root struct {
		Defs map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(config.Schema(), &root); err != nil {
		panic(err) // config.Schema is JSON by construction
	}
	var sessions struct {
		Defs map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(config.SessionSchemaDefs(), &sessions); err != nil {
		panic(err)
	}
	for k, v := range sessions.Defs {
		if _, ok := root.Defs[k]; !ok {
			root.Defs[k] = v
		}
	}
	rewriteRefs(root.Defs)
	return root.Defs
}

func rewriteRefs(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			if s, ok := sub.(string); ok && k == "$ref" {
				x[k] = strings.Replace(s, "#/$defs/", "#/components/schemas/", 1)
			} else {
				rewriteRefs(sub)
			}
		}
	case []any:
		for _, sub := range x {
			rewriteRefs(sub)
		}
	}
}

// prune drops the schemas nothing refers to: the configuration has many
// the API never shows (server, logging...).
func prune(doc map[string]any) {
	components := doc["components"].(map[string]any)
	schemas := components["schemas"].(map[string]any)
	used := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if s, ok := x["$ref"].(string); ok {
				if name, ok := strings.CutPrefix(s, "#/components/schemas/"); ok && !used[name] {
					used[name] = true
					walk(schemas[name])
				}
			}
			for _, sub := range x {
				walk(sub)
			}
		case []any:
			for _, sub := range x {
				walk(sub)
			}
		}
	}
	walk(doc["paths"])
	walk(components["parameters"])
	walk(components["headers"])
	for name := range schemas {
		if !used[name] {
			delete(schemas, name)
		}
	}
}

// object is a closed JSON object: a key the handler does not write is an
// error of the document, and the tests validate answers against it.
func object(required []string, props map[string]any) map[string]any {
	s := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func answerSchemas() map[string]any {
	codes := apierr.Codes()
	slices.Sort(codes)
	enum := make([]any, len(codes))
	for i, c := range codes {
		enum[i] = string(c)
	}
	global := map[string]any{}
	var actionNames []string
	for _, a := range actions {
		global[string(a)] = map[string]any{"type": "boolean"}
		actionNames = append(actionNames, string(a))
	}
	perProxy := map[string]any{}
	var perProxyNames []string
	for _, a := range []Action{ActRead, ActUpdate, ActDelete, ActUpload} {
		perProxy[string(a)] = map[string]any{"type": "boolean"}
		perProxyNames = append(perProxyNames, string(a))
	}
	str := map[string]any{"type": "string"}
	count := map[string]any{"type": "integer", "minimum": 0}
	return map[string]any{
		"ErrorBody": object([]string{"status", "message", "code"}, map[string]any{
			"status":  map[string]any{"const": "error"},
			"message": map[string]any{"type": "string", "description": "For people: what went wrong and what to do."},
			"code":    map[string]any{"type": "string", "enum": enum, "description": "For programs: the closed set of codes."},
		}),
		"Revision": map[string]any{
			"type": "string", "pattern": "^[0-9a-f]{16}$", "examples": []any{"3f1c2a9b8d7e6f50"},
			"description": "16 lowercase hex digits naming one version of a proxy (or of the whole configuration).",
		},
		"ProxyRevision": object([]string{"revision", "proxy"}, map[string]any{
			"revision": ref("Revision"),
			"proxy":    withDescription(ref("ProxyConfig"), "The proxy in canonical form: every default explicit."),
		}),
		"ProxyList": object([]string{"proxies"}, map[string]any{
			"proxies": map[string]any{"type": "array", "items": ref("ProxyRevision")},
		}),
		"ProxyCreate": object([]string{"proxy"}, map[string]any{"proxy": ref("ProxyConfig")}),
		"ProxyUpdate": map[string]any{
			"description": "`{\"revision\", \"proxy\"}`, or the bare proxy document with the revision in `If-Match`. A different name renames the proxy.",
			"oneOf": []any{
				object([]string{"proxy"}, map[string]any{"revision": ref("Revision"), "proxy": ref("ProxyConfig")}),
				ref("ProxyConfig"),
			},
		},
		"RecordPreview": object([]string{"mocks", "exchanges", "replicas"}, map[string]any{
			"replicas":  ref("ReplicasAnswered"),
			"mocks":     map[string]any{"type": "array", "items": ref("MockConfig"), "description": "One per method and path, the latest answer winning; `[]` when nothing matched."},
			"exchanges": withDescription(count, "How many exchanges they were made from."),
			"message":   withDescription(str, "Why there are none, when there are none; else which mocks leave out headers `journal.headers` cut, when some do."),
		}),
		"RecordResult": map[string]any{
			"description": "With `apply: false`, or when nothing matched, what would be added (`RecordPreview`); with `apply: true`, the updated proxy and its new revision.",
			"oneOf":       []any{ref("RecordPreview"), ref("ProxyRevision")},
		},
		"TemplateList": object([]string{"templates"}, map[string]any{
			"templates": map[string]any{"type": "array", "items": object([]string{"name", "size"}, map[string]any{
				"name": ref("TemplateName"), "size": withDescription(count, "Bytes."),
			})},
		}),
		"CounterList": object([]string{"counters"}, map[string]any{
			"counters": map[string]any{"type": "array", "items": object([]string{"fault", "mock", "key", "count", "first_seen"}, map[string]any{
				"fault":      map[string]any{"type": "string", "enum": []any{"loss", "latency", "abort", "hang", "bandwidth"}},
				"mock":       map[string]any{"type": []any{"string", "null"}, "description": "The mock whose own fault counts; null for the proxy's."},
				"key":        map[string]any{"type": "string", "description": "The `per` header's value (its first 256 bytes) or the client IP; empty when proxy-wide or the header is missing."},
				"count":      withDescription(count, "The requests `when.headers` admitted."),
				"first_seen": map[string]any{"type": "string", "format": "date-time"},
			})},
		}),
		"ReloadResult": object([]string{"revision", "proxies", "tcp_proxies"}, map[string]any{
			"revision":    ref("Revision"),
			"proxies":     withDescription(count, "How many proxies are in force, tcp proxies included."),
			"tcp_proxies": withDescription(count, "How many of them are tcp proxies."),
			"unapplied": map[string]any{
				"type": "array", "minItems": 1, "description": "Sections that changed but take effect only on a restart; absent when none.",
				"items": map[string]any{"enum": []any{"server", "logging", "control", "templates", "sentry", "admin"}},
			},
		}),
		"AccessReport": object([]string{"caller", "global"}, map[string]any{
			"caller": map[string]any{"oneOf": []any{
				object([]string{"kind"}, map[string]any{"kind": map[string]any{"const": "anonymous"}}),
				object([]string{"kind", "name", "group"}, map[string]any{
					"kind": map[string]any{"const": "token"}, "name": ref("Name"), "group": ref("Name"),
				}),
			}},
			"global": withDescription(object(actionNames, global), "Whether the caller may perform each action, before per-proxy overrides."),
			"proxies": map[string]any{
				"type": "object", "description": "Per proxy, after its overrides; absent when the caller may not list.",
				"propertyNames":        ref("ProxyName"),
				"additionalProperties": object(perProxyNames, perProxy),
			},
		}),
		"RequestList": object([]string{"requests", "dropped", "more", "replicas"}, map[string]any{
			"requests": map[string]any{"type": "array", "items": ref("RequestEntry"), "maxItems": 10000, "description": "Oldest first: the newest `limit` (1000 unless given) of those that matched, of every replica that answered."},
			"dropped":  withDescription(count, "Entries the rings forgot since start to make room for newer ones (by `journal.size` or `journal.bytes`), summed over the replicas that answered."),
			"more":     withDescription(count, "Older entries that matched beyond `limit`, not in `requests`."),
			"replicas": ref("ReplicasAnswered"),
		}),
		"ReplicasAnswered": object([]string{"answered", "missing"}, map[string]any{
			"answered": map[string]any{"type": "array", "items": str, "description": "The ids of the replicas whose journals the answer holds, the one asked first."},
			"missing": map[string]any{"type": "array", "description": "The replicas whose journals it lacks: lost, without an answer within 2 s, or without the fleet key.",
				"items": object([]string{"id", "url", "state", "error"}, map[string]any{
					"id": str, "url": str, "state": map[string]any{"type": "string", "enum": []any{"live", "lost", "unknown"}}, "error": str,
				})},
		}),
		"RequestEntry": requestEntrySchema(),
		"Verification": verificationSchema(),
		"VerifyFailure": object([]string{"status", "message", "code", "matched", "gaps_ms", "requests_omitted", "requests"}, map[string]any{
			"status":           map[string]any{"const": "error"},
			"message":          map[string]any{"type": "string", "description": "Which condition failed, and how."},
			"code":             map[string]any{"const": string(apierr.VerificationFailed)},
			"matched":          withDescription(count, "How many entries match."),
			"gaps_ms":          map[string]any{"type": "array", "items": map[string]any{"type": "number"}},
			"requests":         map[string]any{"type": "array", "items": ref("RequestEntry"), "maxItems": 100, "description": "The matched entries, oldest first: the newest 100 of them."},
			"requests_omitted": withDescription(count, "Older matched entries not in `requests`."),
			"replicas":         ref("ReplicasAnswered"),
			"partial":          map[string]any{"type": "boolean", "description": "Present and true when a replica's journal was missing and the body said `partial`."},
		}),
		"SessionInfo": sessionSchema(map[string]any{"type": "array", "items": ref("ProxyName"), "description": "The proxies it lays over."}),
		"SessionList": object([]string{"sessions"}, map[string]any{
			"sessions": map[string]any{"type": "array", "items": ref("SessionInfo")},
		}),
		"SessionRead": sessionSchema(map[string]any{"type": "object", "additionalProperties": ref("SessionProxy"), "description": "What it lays over each proxy, as written."}),
		"VerifyResult": object([]string{"matched", "gaps_ms", "replicas"}, map[string]any{
			"matched":  withDescription(count, "How many entries match, across the replicas that answered."),
			"gaps_ms":  map[string]any{"type": "array", "items": map[string]any{"type": "number"}, "description": "Milliseconds between consecutive matched entries, merged by time."},
			"replicas": ref("ReplicasAnswered"),
			"partial":  map[string]any{"type": "boolean", "description": "Present and true when a replica's journal was missing and the body said `partial`."},
		}),
		"Replica": object([]string{"id", "url", "host", "pid", "version", "revision", "started_at", "seen_at", "state", "self"}, map[string]any{
			"id":         map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_-]{22}$", "description": "New on every start of the replica."},
			"url":        withDescription(str, "The admin URL its peers call it at (serve --advertise); empty with admin.enable false."),
			"host":       withDescription(str, "The host name it runs on."),
			"pid":        count,
			"version":    withDescription(str, "Doppel's version."),
			"revision":   withDescription(ref("Revision"), "The revision of the configuration it serves."),
			"started_at": map[string]any{"type": "string", "format": "date-time"},
			"seen_at":    map[string]any{"type": "string", "format": "date-time", "description": "Its last heartbeat (every 2 s), by the database's clock."},
			"state":      map[string]any{"type": "string", "enum": []any{"live", "lost"}, "description": "lost: no heartbeat for 10 s."},
			"self":       map[string]any{"type": "boolean", "description": "Whether it is the replica that answered."},
		}),
		"ReplicaList": object([]string{"replicas"}, map[string]any{
			"replicas": map[string]any{"type": "array", "items": ref("Replica"), "maxItems": 1000},
		}),
		"StatusReport": object([]string{"uptime_seconds", "revision", "seeded", "proxies", "replica", "fleet"}, map[string]any{
			"replica": withDescription(str, "The id of the replica that answered (GET /api/v1/replicas)."),
			"fleet": map[string]any{"type": "object", "description": "How many replicas serve the configuration; error instead when the registry cannot be read.",
				"properties": map[string]any{"live": count, "lost": count, "error": str}},
			"uptime_seconds": count,
			"seeded":         map[string]any{"type": "boolean", "description": "Whether fault rolls are reproducible (serve --seed); the seed is not shown."},
			"revision":       withDescription(ref("Revision"), "The whole configuration's revision."),
			"proxies": map[string]any{"type": "array", "items": object([]string{"name", "upstream", "resolve", "mocks"}, map[string]any{
				"name":     ref("ProxyName"),
				"upstream": withDescription(str, "The upstream URL, normalised, without credentials."),
				"resolve":  map[string]any{"type": "string", "pattern": "^(default|header:.+|listen:.+)$", "examples": []any{"default", "header:X-Backend", "listen:127.0.0.1:15432"}, "description": "default, header:<Name>, or for a tcp proxy listen:<HOST:PORT>."},
				"mocks":    withDescription(count, "How many mocks."),
			})},
		}),
	}
}

func withDescription(s map[string]any, d string) map[string]any {
	out := map[string]any{"description": d}
	for k, v := range s {
		out[k] = v
	}
	return out
}

// openAPI answers the document, generated per request: the header tokens
// travel in is the one in force, which a reload may change.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	header := string(s.ctl.Runtime().Document.Admin.Auth.Header)
	b, err := json.MarshalIndent(openAPIDocument(s.routeTable(), header), "", "  ")
	if err != nil {
		panic(err) // maps, strings, numbers and bools only: cannot fail
	}
	serveFixed(w, r, "application/json", append(b, '\n'), etagOf(b))
}

// etagOf is a weak tag of the content: weak because the compressing
// layer around the admin API sends the same content in other encodings.
func etagOf(b []byte) string {
	sum := sha256.Sum256(b)
	return `W/"` + hex.EncodeToString(sum[:8]) + `"`
}

// serveFixed answers a body that only changes with the binary or the
// configuration. no-cache with an ETag: the browser asks every time and
// usually gets a 304, and never shows a stale page after an upgrade.
func serveFixed(w http.ResponseWriter, r *http.Request, contentType string, body []byte, etag string) {
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if matchesETag(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// matchesETag reads If-None-Match: a list of tags, weak ones included
// (RFC 9110 compares them weakly here), or *.
func matchesETag(header, etag string) bool {
	etag = strings.TrimPrefix(etag, "W/")
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

func requestEntrySchema() map[string]any {
	str := map[string]any{"type": "string"}
	nullStr := map[string]any{"type": []any{"string", "null"}}
	headers := map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "array", "items": str},
		"description": "Name -> values, at most `journal.headers` bytes of them (`headers_cut`). The admin auth header, Authorization, Proxy-Authorization and Cookie are `***` unless `journal.reveal` lists them."}
	body := map[string]any{"description": "The first `journal.bodies` bytes: the text when UTF-8, else `{\"base64\": ...}`.",
		"oneOf": []any{str, object([]string{"base64"}, map[string]any{"base64": str})}}
	ms := map[string]any{"type": "number", "minimum": 0}
	return object([]string{"id", "time", "proxy", "mock", "session", "method", "path", "query", "headers", "body", "body_truncated",
		"status", "response_headers", "headers_cut", "response_body", "response_body_truncated", "fault", "duration_ms", "upstream_ms", "client", "tunnel"},
		map[string]any{
			"id":                      withDescription(str, "The X-Request-ID."),
			"time":                    map[string]any{"type": "string", "format": "date-time", "description": "When it arrived, RFC 3339 with nanoseconds."},
			"proxy":                   withDescription(str, "The proxy that handled it; empty when none resolved."),
			"mock":                    withDescription(nullStr, "The mock that answered, or null."),
			"session":                 withDescription(nullStr, "The session it belonged to, or null."),
			"method":                  str,
			"path":                    withDescription(str, "As sent, without the query."),
			"query":                   withDescription(str, "The raw query string as sent."),
			"headers":                 headers,
			"body":                    body,
			"body_truncated":          map[string]any{"type": "boolean"},
			"status":                  map[string]any{"type": []any{"integer", "null"}, "description": "The HTTP status answered; null for a tcp proxy's connection, which has none."},
			"response_headers":        map[string]any{"type": []any{"object", "null"}, "additionalProperties": map[string]any{"type": "array", "items": str}},
			"headers_cut":             map[string]any{"type": "boolean", "description": "Whether `journal.headers` cut `headers` or `response_headers`: the smallest are kept whole, a value cut ends with `…`, the rest is left out."},
			"response_body":           body,
			"response_body_truncated": map[string]any{"type": "boolean"},
			"fault": object([]string{"replace", "loss", "abort", "hang", "bandwidth", "latency_ms"}, map[string]any{
				"replace": map[string]any{"type": "boolean"}, "loss": map[string]any{"type": "boolean"},
				"abort": nullStr, "hang": map[string]any{"type": "boolean"}, "bandwidth": map[string]any{"type": "boolean"},
				"latency_ms": withDescription(ms, "The wait the latency fault actually added."),
			}),
			"duration_ms": withDescription(ms, "To the response headers."),
			"upstream_ms": map[string]any{"type": []any{"number", "null"}, "description": "The upstream's time, or null when none answered."},
			"client":      withDescription(str, "The peer's IP."),
			"replica":     withDescription(str, "The id of the replica that served it (GET /api/v1/replicas)."),
			"counter": map[string]any{"type": "string", "enum": []any{"fleet", "local"},
				"description": "With the PostgreSQL store, where its faults' `when` counts were kept: `fleet` (the database, every replica's), or `local` (this replica's, as the database did not answer within 250 ms). Absent when nothing counted, and with the file store."},
			"tunnel": map[string]any{
				"description": "What an upgraded connection (a WebSocket) relayed after the switch, until it closed, when the entry is recorded, or what a tcp proxy's connection relayed; null for any other request.",
				"oneOf": []any{map[string]any{"type": "null"}, object([]string{"bytes_up", "bytes_down", "duration_ms"}, map[string]any{
					"bytes_up":    withDescription(map[string]any{"type": "integer", "minimum": 0}, "From the client to the upstream."),
					"bytes_down":  withDescription(map[string]any{"type": "integer", "minimum": 0}, "From the upstream to the client."),
					"duration_ms": withDescription(ms, "From the switch to the close."),
				})},
			},
		})
}

func verificationSchema() map[string]any {
	str := map[string]any{"type": "string"}
	rng := object(nil, map[string]any{"min": map[string]any{"type": "number", "minimum": 0}, "max": map[string]any{"type": "number", "minimum": 0}})
	return object(nil, map[string]any{
		"match": object(nil, map[string]any{
			"proxy": str, "mock": str, "method": str, "session": str,
			"path":    withDescription(str, "A regular expression over the path (unanchored)."),
			"headers": map[string]any{"type": "object", "additionalProperties": str, "description": "Header name -> a regular expression one of its values must match."},
		}),
		"count":       withDescription(rng, "How many entries may match."),
		"gaps_ms":     withDescription(rng, "Milliseconds between consecutive matched entries."),
		"same_header": withDescription(str, "A header every matched entry carries with one value, such as Idempotency-Key."),
		"local":       map[string]any{"type": "boolean", "description": "With the PostgreSQL store, verify the journal of the replica asked alone; by default every live replica's is read and merged by time."},
		"partial":     map[string]any{"type": "boolean", "description": "Verify what the replicas that answered hold when some did not; without it a missing replica is 503 REPLICA_UNAVAILABLE."},
	})
}
