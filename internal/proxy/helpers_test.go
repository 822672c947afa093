package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

// seen is what an echo upstream reports about the request it received.
type seen struct {
	Method     string              `json:"method"`
	RequestURI string              `json:"request_uri"`
	Host       string              `json:"host"`
	Header     map[string][]string `json:"header"`
	Body       string              `json:"body"`
}

// echo is an upstream that answers with what it saw.
func echo(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(seen{r.Method, r.RequestURI, r.Host, r.Header, string(body)})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// logSink collects log lines synchronously for assertions.
type logSink struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	flush func()
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// lines returns the request lines logged so far. A request's line is
// written just after its answer, so a test that has its answer may be a
// moment early: wait (briefly) for want lines when want > 0.
func (s *logSink) lines(t *testing.T, want ...int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		got := s.read(t)
		if len(want) == 0 || len(got) >= want[0] || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *logSink) read(t *testing.T) []map[string]any {
	t.Helper()
	s.flush()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var line struct {
			Level  string         `json:"level"`
			Fields map[string]any `json:"fields"`
			Target string         `json:"target"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil || line.Fields == nil {
			t.Fatalf("log line is not tracing's JSON: %q", l)
		}
		if line.Target == "doppel/internal/proxy" && isRequestLine(line.Fields["message"]) {
			line.Fields["level"] = line.Level
			out = append(out, line.Fields)
		}
	}
	return out
}

// isRequestLine says whether a message is one of the request line's.
func isRequestLine(msg any) bool {
	switch msg {
	case telemetry.MsgProxied, telemetry.MsgRejected, telemetry.MsgFailed, telemetry.MsgMocked, telemetry.MsgDropped:
		return true
	}
	return false
}

// doppel is a running handler over a document.
type doppel struct {
	*httptest.Server
	holder *runtime.Holder
	logs   *logSink
}

// start serves src (YAML; "{{up}}" is replaced by upstream) in-process.
func start(t *testing.T, src string, roller fault.Roller) *doppel {
	t.Helper()
	doc, err := config.Load([]byte(src))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, src)
	}
	rt, err := runtime.Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logSink{}
	log := telemetry.NewLogger(logs, "info", "json")
	logs.flush = log.Flush
	h := runtime.NewHolder(rt)
	srv := httptest.NewUnstartedServer(New(h, Options{Roller: roller, Log: log}))
	srv.Config.DisableGeneralOptionsHandler = true // as serve does
	srv.Start()
	t.Cleanup(srv.Close)
	return &doppel{Server: srv, holder: h, logs: logs}
}

const head = "server: {host: 127.0.0.1, port: 8080}\nadmin: {host: 127.0.0.1, port: 8081}\n"

// oneProxy is a document with one default proxy to url plus extra keys.
func oneProxy(url, extra string) string {
	return head + "proxies:\n  - name: zeta\n    type: http\n    url: " + url + "\n" + indent(extra, "    ")
}

func indent(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

func get(t *testing.T, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	return do(t, http.MethodGet, url, header, nil)
}

func do(t *testing.T, method, url string, header map[string]string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

var noRedirects = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport:     &http.Transport{DisableCompression: true},
}

func decodeSeen(t *testing.T, b []byte) seen {
	t.Helper()
	var s seen
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("not an echo answer: %s", b)
	}
	return s
}

func envelope(t *testing.T, res *http.Response, b []byte, status int, code string) {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("status %d, want %d (%s)", res.StatusCode, status, b)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("envelope Content-Type %q", ct)
	}
	var e struct{ Status, Message, Code string }
	if err := json.Unmarshal(b, &e); err != nil || e.Status != "error" || e.Code != code || e.Message == "" {
		t.Fatalf("body %s is not the %s envelope", b, code)
	}
	if res.Header.Get("X-Request-Id") == "" {
		t.Error("an error answer has no X-Request-ID")
	}
}

// envelopeSays is envelope whose message also contains says (Doppel 1.1's
// words for the code, §19.4).
func envelopeSays(t *testing.T, res *http.Response, b []byte, status int, code, says string) {
	t.Helper()
	envelope(t, res, b, status, code)
	var e struct{ Message string }
	if err := json.Unmarshal(b, &e); err != nil || !strings.Contains(e.Message, says) {
		t.Errorf("the %s envelope says %q, want it to contain %q", code, e.Message, says)
	}
}

// fixed answers every roll of one kind with the same number.
type fixed map[fault.Roll]float64

func (f fixed) Float64(k fault.Key) float64 {
	if v, ok := f[k.Roll]; ok {
		return v
	}
	return 0.999
}

// seeded is a reproducible random Roller for statistical tests.
type seeded struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newSeeded(seed uint64) *seeded {
	return &seeded{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (s *seeded) Float64(fault.Key) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Float64()
}
