// Package doppeltest runs Doppel inside a Go test, the way net/http/httptest
// runs a server: no file to write, no process to start, no port to pick,
// no sleep.
//
//	s := doppeltest.New(t, doppeltest.Config{YAML: `
//	proxies:
//	  - name: api
//	    type: http
//	    url: ` + backend.URL + `
//	    loss: {percentage: 1, status: 503, when: {count: {first: 2}}}
//	`})
//	resp, err := myClient.Get(s.ProxyURL + "/orders")
//
// New starts one Doppel on free loopback ports, waits until it serves,
// and stops it when the test ends. Its configuration lives in a file store
// in the test's temporary directory, so everything the admin API does
// works: s.Client is a client of it with a token of the admin group.
// Many may run in one test binary, in parallel: nothing is shared between
// them.
package doppeltest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/client"
	"github.com/doppelproxy/doppel/internal/admin"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/instance"
	"github.com/doppelproxy/doppel/internal/store/file"
	"github.com/doppelproxy/doppel/internal/telemetry"
	"github.com/goccy/go-yaml"
)

// Config is what a Doppel starts with: a whole configuration document as
// YAML, or proxies as Go values. Sections the document leaves out are
// filled in: server and admin on loopback (the ports are always free
// ones, whatever the document says), templates in the test's temporary
// directory.
type Config struct {
	// YAML is a configuration document, as doppel serve reads one.
	YAML string
	// Proxies are the proxies of a document that has nothing else;
	// exclusive with YAML.
	Proxies []client.Proxy
	// Seed makes fault rolls reproducible, as serve --seed does.
	Seed string
	// Logs receives Doppel's log lines (JSON unless logging.format is
	// text). When nil they are kept, the last 256 KiB, and printed
	// with t.Log only if the test failed.
	Logs io.Writer
}

// Server is a Doppel serving a test.
type Server struct {
	// ProxyURL is the proxy listener: point the client under test here.
	ProxyURL string
	// AdminURL is the admin API.
	AdminURL string
	// Token is a token of the admin group, which Client sends.
	Token string
	// Client calls the admin API with Token.
	Client *client.Client
	// SessionHeader is the header requests carry a session's id in.
	SessionHeader string

	dir     string
	store   *file.Store
	log     *telemetry.Logger
	inst    *instance.Instance
	stopped <-chan error
}

// New starts a Doppel for t and stops it when t ends. A document with
// violations fails the test with every one listed. Unless Config.Logs is
// set, Doppel's log is printed when the test fails.
func New(t testing.TB, cfg Config) *Server {
	t.Helper()
	var kept *tail
	if cfg.Logs == nil {
		kept = &tail{max: 256 << 10}
		cfg.Logs = kept
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("doppeltest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("doppeltest: %v", err)
		}
		if kept != nil && t.Failed() {
			t.Logf("doppeltest: Doppel's log:\n%s", kept.String())
		}
	})
	return s
}

// Start starts a Doppel outside a test's lifetime: for TestMain, a suite
// sharing one, or an example. Close stops it.
func Start(cfg Config) (_ *Server, err error) {
	dir, err := os.MkdirTemp("", "doppeltest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	src, err := documentOf(cfg, filepath.Join(dir, "templates"))
	if err != nil {
		return nil, err
	}
	doc, err := config.Load(src)
	if err != nil {
		var inv *config.Invalid
		if errors.As(err, &inv) {
			return nil, fmt.Errorf("the configuration is invalid:\n%s", strings.Join(inv.Lines(), "\n"))
		}
		return nil, err
	}
	path := filepath.Join(dir, "doppel.yaml")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(string(doc.Templates.Dir), 0o755); err != nil {
		return nil, err
	}
	if s.store, err = file.Open(path, string(doc.Templates.Dir)); err != nil {
		return nil, err
	}
	// The admin listener's settings take effect at start only, so this
	// one stays on whatever a reload reads.
	on := true
	doc.Admin.Enable = &on
	logs := cfg.Logs
	if logs == nil {
		logs = io.Discard
	}
	level, err := telemetry.EnvLevel(string(doc.Logging.Level))
	if err != nil {
		return nil, err
	}
	s.log = telemetry.NewLogger(logs, string(doc.Logging.Level), string(doc.Logging.Format))
	s.log.Level.Set(level)
	s.Token = newToken()
	s.inst, err = instance.Start(doc, instance.Options{
		Store:     s.store,
		ProxyAddr: "127.0.0.1:0",
		AdminAddr: "127.0.0.1:0",
		Seed:      cfg.Seed,
		EnvTokens: []admin.Token{{Name: "doppeltest", Group: config.GroupAdmin, Value: config.Token(s.Token)}},
		Log:       s.log,
		// server.tls.auto keeps its files here, in the temporary directory.
		ConfigPath: path,
	})
	if err != nil {
		return nil, err
	}
	s.stopped = s.inst.Serve()
	s.ProxyURL = "http://" + s.inst.ProxyAddr().String()
	if doc.Server.TLS != nil {
		s.ProxyURL = "https://" + s.inst.ProxyAddr().String()
	}
	s.AdminURL = "http://" + s.inst.AdminAddr().String()
	s.SessionHeader = string(config.SessionHeaderOf(doc))
	s.Client = client.New(s.AdminURL, client.WithToken(s.Token))
	// Bound and serving from here on; one call makes sure.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Client.Status(ctx); err != nil {
		return nil, fmt.Errorf("the Doppel started does not answer: %v", err)
	}
	return s, nil
}

// Close stops the Doppel: in-flight requests get up to five seconds, then
// its files are removed. It reports a listener that had stopped by
// itself.
func (s *Server) Close() error {
	var err error
	if s.inst != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.inst.Shutdown(ctx)
		cancel()
		select {
		case e := <-s.stopped:
			err = fmt.Errorf("a listener stopped by itself: %v", e)
		default:
		}
		s.inst = nil
	}
	if s.store != nil {
		_ = s.store.Close()
		s.store = nil
	}
	if s.log != nil {
		s.log.Flush()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
		s.dir = ""
	}
	return err
}

// documentOf is the document to serve: cfg's, with the sections it lacks
// added after its own text, so that a violation's line is the line the
// test wrote.
func documentOf(cfg Config, templates string) ([]byte, error) {
	if cfg.YAML != "" && cfg.Proxies != nil {
		return nil, errors.New("the Config has YAML and Proxies: set one of them")
	}
	src := []byte(cfg.YAML)
	if cfg.YAML == "" {
		proxies := make([]client.Proxy, len(cfg.Proxies))
		for i, p := range cfg.Proxies {
			if p.Type == "" {
				p.Type = "http"
			}
			proxies[i] = p
		}
		b, err := json.Marshal(map[string]any{"proxies": proxies})
		if err != nil {
			return nil, err
		}
		src = append(b, '\n')
	}
	var top map[string]any
	if err := yaml.Unmarshal(src, &top); err != nil {
		return nil, fmt.Errorf("the YAML is not a document: %v", err)
	}
	added := map[string]any{}
	if _, ok := top["server"]; !ok {
		added["server"] = map[string]any{"host": "127.0.0.1", "port": 1}
	}
	if _, ok := top["admin"]; !ok {
		added["admin"] = map[string]any{"host": "127.0.0.1", "port": 2}
	}
	if _, ok := top["templates"]; !ok {
		added["templates"] = map[string]any{"dir": templates}
	}
	if _, ok := top["proxies"]; !ok {
		added["proxies"] = []any{}
	}
	if len(added) == 0 {
		return src, nil
	}
	trimmed := bytes.TrimSpace(src)
	if bytes.HasPrefix(trimmed, []byte("{")) {
		// A flow mapping takes no block keys after it: merged and
		// written again, on one line as it was.
		for k, v := range added {
			top[k] = v
		}
		b, err := json.Marshal(top)
		return append(b, '\n'), err
	}
	out := bytes.TrimRight(src, "\n")
	if len(trimmed) > 0 {
		out = append(out, '\n')
	}
	for _, k := range []string{"server", "admin", "templates", "proxies"} {
		if v, ok := added[k]; ok {
			b, _ := json.Marshal(v)
			out = fmt.Appendf(out, "%s: %s\n", k, b)
		}
	}
	return out, nil
}

func newToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "doppeltest-" + hex.EncodeToString(b)
}

// Session is a session of a test: requests carrying its id get its mocks
// and faults.
type Session struct {
	// ID is the session's id.
	ID string
	// Header is the header its id travels in.
	Header string
}

// Session starts a session laying overlay over the proxies it names
// (proxy name -> mocks and faults) and ends it when t ends. Send its id
// with s.Apply, s.Transport or s.HTTPClient.
func (s *Server) Session(t testing.TB, overlay map[string]client.SessionProxy) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := s.Client.CreateSession(ctx, client.Session{Proxies: overlay})
	if err != nil {
		t.Fatalf("doppeltest: the session: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Client.DeleteSession(ctx, info.ID); err != nil && !errors.Is(err, client.ErrNotFound) {
			t.Errorf("doppeltest: ending the session: %v", err)
		}
	})
	return &Session{ID: info.ID, Header: s.SessionHeader}
}

// Apply puts the session's id on r.
func (ss *Session) Apply(r *http.Request) { r.Header.Set(ss.Header, ss.ID) }

// Transport sends every request through base (http.DefaultTransport when
// nil) with the session's id.
func (ss *Session) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return sessionTransport{ss, base}
}

// HTTPClient is an http.Client whose requests carry the session's id.
func (ss *Session) HTTPClient() *http.Client { return &http.Client{Transport: ss.Transport(nil)} }

type sessionTransport struct {
	ss   *Session
	base http.RoundTripper
}

func (st sessionTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context()) // a RoundTripper leaves the caller's request as it was
	st.ss.Apply(r)
	return st.base.RoundTrip(r)
}

// Verify checks the journal and fails the test, with the message and the
// entries matched, when a condition does not hold.
func (s *Server) Verify(t testing.TB, v client.Verification) client.VerifyResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.Client.Verify(ctx, v)
	var failed *client.VerificationError
	if errors.As(err, &failed) {
		var lines []string
		for _, r := range failed.Requests {
			target := r.Path
			if r.Query != "" {
				target += "?" + r.Query
			}
			lines = append(lines, fmt.Sprintf("  %s %s %s -> %d (%s)", r.Time.Format("15:04:05.000"), r.Method, target, r.Status, r.ID))
		}
		t.Fatalf("doppeltest: verification failed: %s\nmatched %d:\n%s", failed.Message, failed.Matched, strings.Join(lines, "\n"))
	}
	if err != nil {
		t.Fatalf("doppeltest: verifying: %v", err)
	}
	return res
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped bool
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		if i := bytes.IndexByte(w.buf[over:], '\n'); i >= 0 {
			over += i + 1
		}
		w.buf = append(w.buf[:0], w.buf[min(over, len(w.buf)):]...)
		w.dropped = true
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dropped {
		return "(earlier lines dropped)\n" + string(w.buf)
	}
	return string(w.buf)
}
