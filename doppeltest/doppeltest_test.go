package doppeltest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/doppelproxy/doppel/client"
	"github.com/doppelproxy/doppel/doppeltest"
)

func mockAnswering(name, body string) client.Proxy {
	return client.Proxy{Name: name, URL: "http://127.0.0.1:9", Mocks: []client.Mock{{
		Name: "who", Request: client.MockRequest{Method: "GET", URL: "^/who$"},
		Response: client.MockResponse{Status: 200, Body: body}}}}
}

func body(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Many in one test binary, in parallel: each its own ports, proxies and
// journal.
func TestManyInParallel(t *testing.T) {
	urls := sync.Map{}
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			want := fmt.Sprintf("doppel %d", i)
			s := doppeltest.New(t, doppeltest.Config{Proxies: []client.Proxy{mockAnswering("p"+fmt.Sprint(i+10), want)}})
			if other, taken := urls.LoadOrStore(s.ProxyURL, i); taken {
				t.Fatalf("%s is doppel %d's too", s.ProxyURL, other)
			}
			for range 3 {
				if got := body(t, http.DefaultClient, s.ProxyURL+"/who"); got != want {
					t.Fatalf("got %q, want %q", got, want)
				}
			}
			s.Verify(t, client.Verification{Match: client.Match{Path: "^/who$"}, Count: client.Exactly(3)})
		})
	}
}

func TestAnInvalidDocumentSaysWhereWithItsOwnLines(t *testing.T) {
	_, err := doppeltest.Start(doppeltest.Config{YAML: `
proxies:
  - name: shop
    type: http
    url: ftp://nowhere
`})
	if err == nil || !strings.Contains(err.Error(), "proxies[0].url") || !strings.Contains(err.Error(), "line 5") {
		t.Errorf("got %v, want the url's violation on line 5", err)
	}
	_, err = doppeltest.Start(doppeltest.Config{YAML: "proxies: []", Proxies: []client.Proxy{mockAnswering("pp", "x")}})
	if err == nil || !strings.Contains(err.Error(), "set one") {
		t.Errorf("YAML and Proxies: %v", err)
	}
	if _, err := doppeltest.Start(doppeltest.Config{YAML: "proxies: [unclosed"}); err == nil {
		t.Error("broken YAML: no error")
	}
}

func TestTheDocumentsOwnSectionsAreKept(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) })
	// A flow document, the admin listener switched off, a session header
	// of its own, logs as text.
	s := doppeltest.New(t, doppeltest.Config{Logs: w, YAML: `{server: {host: 0.0.0.0, port: 8080, session_header: X-Test},
admin: {host: 127.0.0.1, port: 8081, enable: false}, logging: {level: info, format: text},
proxies: [{name: shop, type: http, url: "http://127.0.0.1:9",
  mocks: [{name: page, request: {method: GET, url: ^/page$}, response: {status: 200, template: page.j2}}]}]}`})
	if !strings.HasPrefix(s.ProxyURL, "http://127.0.0.1:") || strings.HasSuffix(s.ProxyURL, ":8080") {
		t.Errorf("ProxyURL %s: want a free loopback port", s.ProxyURL)
	}
	if s.SessionHeader != "X-Test" {
		t.Errorf("SessionHeader %q", s.SessionHeader)
	}
	// Templates go to the test's directory, not the working one.
	ctx := context.Background()
	if err := s.Client.UploadTemplate(ctx, "shop", "page.j2", strings.NewReader("page {{ 6 * 7 }}")); err != nil {
		t.Fatal(err)
	}
	if got := body(t, http.DefaultClient, s.ProxyURL+"/page"); got != "page 42" {
		t.Errorf("the template: %q", got)
	}
	if _, err := os.Stat("templates"); err == nil {
		t.Error("a templates directory in the working directory")
	}
	sess := s.Session(t, map[string]client.SessionProxy{"shop": {Mocks: []client.Mock{{Name: "page",
		Request: client.MockRequest{Method: "GET", URL: "^/page$"}, Response: client.MockResponse{Status: 200, Body: "session page"}}}}})
	if sess.Header != "X-Test" || body(t, sess.HTTPClient(), s.ProxyURL+"/page") != "session page" {
		t.Errorf("the session %+v does not answer its requests", sess)
	}
	if got := body(t, http.DefaultClient, s.ProxyURL+"/page"); got != "page 42" {
		t.Errorf("outside the session: %q", got)
	}
	s.Verify(t, client.Verification{Match: client.Match{Session: sess.ID}, Count: client.Exactly(1)})
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), " INFO doppel/internal/proxy: request mocked ") || !strings.Contains(logs.String(), `path="/page"`) {
		t.Errorf("the text log lines:\n%s", logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A session ends with the (sub)test that made it.
func TestASessionEndsWithItsTest(t *testing.T) {
	s := doppeltest.New(t, doppeltest.Config{Proxies: []client.Proxy{mockAnswering("shop", "base")}})
	var id string
	t.Run("inside", func(t *testing.T) {
		sess := s.Session(t, map[string]client.SessionProxy{"shop": {Loss: &client.Loss{Percentage: 1, Status: 503}}})
		id = sess.ID
		req, _ := http.NewRequest("GET", s.ProxyURL+"/who", nil)
		sess.Apply(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// A loss does not apply to a mocked answer: the mock's own
		// would. The session is in force, and the request in it.
		if resp.StatusCode != 200 {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
	list, err := s.Client.Sessions(context.Background())
	if err != nil || len(list) != 0 {
		t.Errorf("after the subtest: %+v %v (session %s)", list, err, id)
	}
	s.Verify(t, client.Verification{Match: client.Match{Session: id}, Count: client.Exactly(1)})
}

// BenchmarkStartAndClose is what a Doppel costs a test: go test
// ./doppeltest -run '^$' -bench StartAndClose.
func BenchmarkStartAndClose(b *testing.B) {
	cfg := doppeltest.Config{Proxies: []client.Proxy{mockAnswering("shop", "x")}, Logs: io.Discard}
	for b.Loop() {
		s, err := doppeltest.Start(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
