package toxiproxy

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// call sends one request to s and returns the status and body.
func call(t *testing.T, s *Server, method, path, body string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b)
}

func newServer(t *testing.T) *Server {
	s := &Server{}
	t.Cleanup(s.Close)
	return s
}

// quietUpstream is an address nothing needs to answer on: these tests read the
// API, not the relay.
const quietUpstream = "127.0.0.1:9"

func wantError(t *testing.T, status int, body string, wantStatus int, wantMsg string) {
	t.Helper()
	var e apiError
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("the body is not Toxiproxy's error: %q", body)
	}
	if status != wantStatus || e.Status != wantStatus || !strings.HasPrefix(e.Message, wantMsg) {
		t.Fatalf("got %d %q, want %d {error: %q…, status: %d}", status, body, wantStatus, wantMsg, wantStatus)
	}
}

func TestProxiesAreMadeListedUpdatedAndDeleted(t *testing.T) {
	s := newServer(t)
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	upstream := up.Addr().String()
	code, body := call(t, s, "POST", "/proxies", `{"name":"db","listen":"127.0.0.1:0","upstream":"`+upstream+`"}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var p proxyJSON
	_ = json.Unmarshal([]byte(body), &p)
	if p.Name != "db" || !p.Enabled || strings.HasSuffix(p.Listen, ":0") || p.Toxics == nil {
		t.Fatalf("created: %+v; want enabled, the port bound, toxics []", p)
	}
	if c, err := net.Dial("tcp", p.Listen); err != nil {
		t.Fatalf("the proxy does not listen: %v", err)
	} else {
		c.Close()
	}
	code, body = call(t, s, "GET", "/proxies", "")
	var all map[string]proxyJSON
	if err := json.Unmarshal([]byte(body), &all); code != 200 || err != nil || all["db"].Listen != p.Listen {
		t.Fatalf("index: %d %s", code, body)
	}
	code, body = call(t, s, "POST", "/proxies/db", `{"enabled":false}`)
	_ = json.Unmarshal([]byte(body), &p)
	if code != 200 || p.Enabled {
		t.Fatalf("disable: %d %s", code, body)
	}
	if c, err := net.Dial("tcp", p.Listen); err == nil {
		c.Close()
		t.Fatal("a disabled proxy still listens")
	}
	code, body = call(t, s, "PATCH", "/proxies/db", `{"enabled":true}`)
	_ = json.Unmarshal([]byte(body), &p)
	if code != 200 || !p.Enabled || p.Upstream != upstream {
		t.Fatalf("enable: %d %s", code, body)
	}
	if code, _ := call(t, s, "DELETE", "/proxies/db", ""); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	code, body = call(t, s, "GET", "/proxies/db", "")
	wantError(t, code, body, 404, "proxy not found")
}

func TestProxyErrorsAreToxiproxys(t *testing.T) {
	s := newServer(t)
	code, body := call(t, s, "POST", "/proxies", `{"listen":"127.0.0.1:0","upstream":"127.0.0.1:1"}`)
	wantError(t, code, body, 400, "missing required field: name")
	code, body = call(t, s, "POST", "/proxies", `{"name":"db","listen":"127.0.0.1:0"}`)
	wantError(t, code, body, 400, "missing required field: upstream")
	code, body = call(t, s, "POST", "/proxies", `{"name":`)
	wantError(t, code, body, 400, "bad request body")
	call(t, s, "POST", "/proxies", `{"name":"db","listen":"127.0.0.1:0","upstream":"127.0.0.1:1","enabled":false}`)
	code, body = call(t, s, "POST", "/proxies", `{"name":"db","listen":"127.0.0.1:0","upstream":"127.0.0.1:1"}`)
	wantError(t, code, body, 409, "proxy already exists")
	code, body = call(t, s, "POST", "/proxies/db", `[`)
	wantError(t, code, body, 400, "bad request body")
	code, body = call(t, s, "POST", "/proxies", strings.Repeat(" ", MaxBody+1))
	wantError(t, code, body, 413, "bad request body")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, body = call(t, s, "POST", "/proxies", `{"name":"taken","listen":"`+ln.Addr().String()+`","upstream":"127.0.0.1:1"}`)
	wantError(t, code, body, 500, "")
	if !strings.Contains(body, ln.Addr().String()) {
		t.Errorf("a listen in use does not name the address: %s", body)
	}
	r := httptest.NewRequest("GET", "/proxies", nil)
	r.Header.Set("User-Agent", "Mozilla/5.0")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden {
		t.Errorf("a browser: %d, want 403", w.Code)
	}
}

func TestToxicsAreMadeWithToxiproxysDefaults(t *testing.T) {
	s := newServer(t)
	call(t, s, "POST", "/proxies", `{"name":"db","listen":"127.0.0.1:0","upstream":"`+quietUpstream+`"}`)
	code, body := call(t, s, "POST", "/proxies/db/toxics", `{"type":"latency","attributes":{"latency":100,"jitter":10}}`)
	if code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	if want := `{"name":"latency_downstream","type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":100,"jitter":10}}`; body != want {
		t.Errorf("created:\n%s\nwant\n%s", body, want)
	}
	code, body = call(t, s, "POST", "/proxies/db/toxics", `{"type":"latency","attributes":{"latency":5}}`)
	wantError(t, code, body, 409, "toxic already exists")
	code, body = call(t, s, "POST", "/proxies/db/toxics", `{"type":"earthquake"}`)
	wantError(t, code, body, 400, "invalid toxic type")
	code, body = call(t, s, "POST", "/proxies/db/toxics", `{"type":"latency","stream":"sideways"}`)
	wantError(t, code, body, 400, "stream was invalid")
	code, body = call(t, s, "POST", "/proxies/db/toxics", `{"type":"latency","stream":"upstream","attributes":{"latency":-1}}`)
	wantError(t, code, body, 400, "bad request body: attributes: latency is -1")
	code, body = call(t, s, "POST", "/proxies/db/toxics", `{"type":"latency","stream":"upstream","attributes":{"latency":"slow"}}`)
	wantError(t, code, body, 400, "bad request body")
	code, body = call(t, s, "POST", "/proxies/nope/toxics", `{"type":"latency"}`)
	wantError(t, code, body, 404, "proxy not found")
	code, body = call(t, s, "POST", "/proxies/db/toxics", `{"name":"cut","type":"limit_data","stream":"UPSTREAM","toxicity":0.5,"attributes":{"bytes":10}}`)
	if code != 200 || !strings.Contains(body, `"stream":"upstream","toxicity":0.5`) {
		t.Fatalf("a named upstream toxic: %d %s", code, body)
	}
	// Toxiproxy's order: the upstream chain first.
	code, body = call(t, s, "GET", "/proxies/db/toxics", "")
	var names []string
	var raw []map[string]any
	_ = json.Unmarshal([]byte(body), &raw)
	for _, t := range raw {
		names = append(names, t["name"].(string))
	}
	if code != 200 || strings.Join(names, ",") != "cut,latency_downstream" {
		t.Fatalf("index: %d %s", code, body)
	}
	// An update keeps what it does not give.
	code, body = call(t, s, "POST", "/proxies/db/toxics/latency_downstream", `{"attributes":{"latency":300}}`)
	if code != 200 || !strings.Contains(body, `"toxicity":1,"attributes":{"latency":300,"jitter":10}`) {
		t.Fatalf("update: %d %s", code, body)
	}
	code, body = call(t, s, "PATCH", "/proxies/db/toxics/latency_downstream", `{"toxicity":0.25}`)
	if code != 200 || !strings.Contains(body, `"toxicity":0.25,"attributes":{"latency":300,"jitter":10}`) {
		t.Fatalf("update with PATCH: %d %s", code, body)
	}
	code, body = call(t, s, "POST", "/proxies/db/toxics/gone", `{}`)
	wantError(t, code, body, 404, "toxic not found")
	if code, _ := call(t, s, "DELETE", "/proxies/db/toxics/cut", ""); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	code, body = call(t, s, "GET", "/proxies/db/toxics/cut", "")
	wantError(t, code, body, 404, "toxic not found")
	if code, _ := call(t, s, "POST", "/reset", ""); code != 204 {
		t.Fatalf("reset: %d", code)
	}
	if _, body := call(t, s, "GET", "/proxies/db/toxics", ""); body != "[]" {
		t.Fatalf("after a reset: %s", body)
	}

}

func TestPopulateMakesSeveralAndKeepsTheSame(t *testing.T) {
	s := newServer(t)
	code, body := call(t, s, "POST", "/populate", `[{"name":"zeta","listen":"127.0.0.1:0","upstream":"127.0.0.1:1"},{"name":"alpha","listen":"127.0.0.1:0","upstream":"127.0.0.1:2","enabled":false}]`)
	var got struct {
		Proxies []proxyJSON `json:"proxies"`
		Error   string      `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &got)
	if code != 201 || len(got.Proxies) != 2 || got.Proxies[0].Name != "zeta" || !got.Proxies[0].Enabled || got.Proxies[1].Enabled || got.Error != "" {
		t.Fatalf("populate: %d %s", code, body)
	}
	code, body = call(t, s, "POST", "/populate", `[{"name":"ok","upstream":"127.0.0.1:1"},{"name":"","upstream":"127.0.0.1:1"}]`)
	wantError(t, code, body, 400, "missing required field: name at proxy 2")
	if code, _ := call(t, s, "GET", "/proxies/ok", ""); code != 404 {
		t.Error("a list with a fault made some of its proxies")
	}
}

func TestProxiesAreBounded(t *testing.T) {
	s := newServer(t)
	var b strings.Builder
	b.WriteString("[")
	for i := range MaxProxies + 1 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"name":"p` + strconv.Itoa(i) + `","upstream":"127.0.0.1:1","enabled":false}`)
	}
	b.WriteString("]")
	code, body := call(t, s, "POST", "/populate", b.String())
	wantError(t, code, body, 400, "too many proxies")
}

// A proxy made disabled reports its listen as written until it listens,
// then the address bound, as Toxiproxy does.
func TestADisabledProxyReportsItsListenAsWritten(t *testing.T) {
	s := newServer(t)
	code, body := call(t, s, "POST", "/proxies", `{"name":"db","listen":"localhost:0","upstream":"127.0.0.1:1","enabled":false}`)
	var p proxyJSON
	if _ = json.Unmarshal([]byte(body), &p); code != 201 || p.Listen != "localhost:0" || p.Enabled {
		t.Fatalf("made disabled: %d %s", code, body)
	}
	_, body = call(t, s, "POST", "/proxies/db", `{"enabled":true}`)
	if _ = json.Unmarshal([]byte(body), &p); !p.Enabled || !strings.HasPrefix(p.Listen, "127.0.0.1:") || p.Listen == "127.0.0.1:0" {
		t.Fatalf("enabled: %s", body)
	}
	bound := p.Listen
	_, body = call(t, s, "POST", "/proxies/db", `{"enabled":false}`)
	if _ = json.Unmarshal([]byte(body), &p); p.Enabled || p.Listen != bound {
		t.Fatalf("disabled again, it reports %q, want the address it was bound to, %q: %s", p.Listen, bound, body)
	}
}
