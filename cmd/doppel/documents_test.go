package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestOpenAPIEnvelopeIsErrorBody: /openapi.json names the error envelope
// as 1.1 does (components.schemas.ErrorBody), and every error answer of
// every operation refers to it (a failed verification, to the envelope
// with its evidence).
func TestOpenAPIEnvelopeIsErrorBody(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ports := freePorts(t, 2)
	cfg := writeFile(t, dir, "main.yaml", dashboardDoc(dir, ports[0], ports[1]))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	p.waitServing()
	addr := "127.0.0.1:" + strconv.Itoa(ports[1])
	waitListening(t, p, addr)
	res, err := http.Get("http://" + addr + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		Paths      map[string]map[string]struct{ Responses map[string]json.RawMessage }
		Components struct{ Schemas map[string]json.RawMessage }
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var envelope struct{ Required []string }
	if err := json.Unmarshal(doc.Components.Schemas["ErrorBody"], &envelope); err != nil || strings.Join(envelope.Required, ",") != "status,message,code" {
		t.Fatalf("components.schemas.ErrorBody: %s (%v)", doc.Components.Schemas["ErrorBody"], err)
	}
	if _, ok := doc.Components.Schemas["Error"]; ok {
		t.Error("the envelope is still also named Error")
	}
	errors := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for status, reply := range op.Responses {
				if status[0] == '4' || status[0] == '5' {
					if strings.Contains(string(reply), "application/json") {
						errors++
						// A failed verification is the envelope with its evidence added.
						if !strings.Contains(string(reply), "#/components/schemas/ErrorBody") && !strings.Contains(string(reply), "#/components/schemas/VerifyFailure") {
							t.Errorf("%s %s %s does not refer to ErrorBody: %s", method, path, status, reply)
						}
					}
				}
			}
		}
	}
	if errors < 20 {
		t.Errorf("only %d error answers documented", errors)
	}
}

// defsOf11 are the $defs names of 1.1's doppel-config.schema.json.
var defsOf11 = []string{
	"AccessConfig", "AdminConfig", "AdminTitle", "AllowedGroup", "AuthConfig", "ByteSize", "ControlConfig",
	"ExternalUrl", "HeaderName", "HeaderValue", "HttpMethod", "HttpStatus", "LatencyConfig", "LogFormat",
	"LogLevel", "LoggingConfig", "LossConfig", "MockConfig", "MockProxyOverride", "MockRequest", "MockResponse",
	"Name", "Pattern", "Port", "ProxyAccessConfig", "ProxyConfig", "ProxyKind", "ProxyName", "Ratio",
	"ResolveConfig", "ResolveKind", "Seconds", "Selector", "SentryConfig", "ServerConfig", "Subjects",
	"TemplateName", "TemplatesConfig", "TimeoutSeconds", "Token", "TokenConfig", "UploadConfig", "UpstreamUrl",
}

// TestSchemaKeeps11sDefNames: `doppel config schema` and /api/v1/schema
// carry every $defs name 1.1's schema has, the root's properties refer to
// them as 1.1's do, and /openapi.json describes a proxy under 1.1's name.
func TestSchemaKeeps11sDefNames(t *testing.T) {
	t.Parallel()
	r := doppel(t, invocation{args: []string{"config", "schema"}})
	if r.code != 0 {
		t.Fatalf("config schema: %d %s", r.code, r.stderr)
	}
	dir := t.TempDir()
	ports := freePorts(t, 2)
	cfg := writeFile(t, dir, "main.yaml", dashboardDoc(dir, ports[0], ports[1]))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	p.waitServing()
	addr := "127.0.0.1:" + strconv.Itoa(ports[1])
	waitListening(t, p, addr)
	get := func(path string) []byte {
		t.Helper()
		res, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return b
	}
	served := get("/api/v1/schema")
	if string(served) != r.stdout {
		t.Error("/api/v1/schema differs from `doppel config schema`")
	}
	var schema struct {
		Defs       map[string]json.RawMessage `json:"$defs"`
		Properties map[string]json.RawMessage
	}
	if err := json.Unmarshal(served, &schema); err != nil {
		t.Fatal(err)
	}
	for _, name := range defsOf11 {
		if _, ok := schema.Defs[name]; !ok {
			t.Errorf("$defs has no %s", name)
		}
	}
	for key, want := range map[string]string{"server": "ServerConfig", "admin": "AdminConfig", "proxies": "ProxyConfig", "logging": "LoggingConfig"} {
		if !strings.Contains(string(schema.Properties[key]), `"#/$defs/`+want+`"`) {
			t.Errorf("properties.%s: %s, want a reference to %s", key, schema.Properties[key], want)
		}
	}
	var doc struct {
		Components struct{ Schemas map[string]json.RawMessage }
	}
	if err := json.Unmarshal(get("/openapi.json"), &doc); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ProxyConfig", "MockConfig", "LatencyConfig"} {
		if _, ok := doc.Components.Schemas[name]; !ok {
			t.Errorf("/openapi.json has no components.schemas.%s", name)
		}
	}
}
