package client_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/client"
	"github.com/doppelproxy/doppel/doppeltest"
)

// everyCall calls each operation once, by its id, and returns its error.
var everyCall = map[string]func(context.Context, *client.Client) error{
	"listProxies": func(ctx context.Context, c *client.Client) error { _, err := c.Proxies(ctx); return err },
	"createProxy": func(ctx context.Context, c *client.Client) error {
		_, err := c.CreateProxy(ctx, client.Proxy{Name: "pp", URL: "http://127.0.0.1:9"})
		return err
	},
	"readProxy": func(ctx context.Context, c *client.Client) error { _, _, err := c.Proxy(ctx, "pp"); return err },
	"updateProxy": func(ctx context.Context, c *client.Client) error {
		_, err := c.UpdateProxy(ctx, client.Proxy{Name: "pp", URL: "http://127.0.0.1:9"}, "0123456789abcdef")
		return err
	},
	"deleteProxy":   func(ctx context.Context, c *client.Client) error { return c.DeleteProxy(ctx, "pp") },
	"listTemplates": func(ctx context.Context, c *client.Client) error { _, err := c.Templates(ctx, "pp"); return err },
	"uploadTemplatePut": func(ctx context.Context, c *client.Client) error {
		return c.UploadTemplate(ctx, "pp", "a.j2", strings.NewReader("x"))
	},
	"deleteTemplate": func(ctx context.Context, c *client.Client) error { return c.DeleteTemplate(ctx, "pp", "a.j2") },
	"listCounters":   func(ctx context.Context, c *client.Client) error { _, err := c.Counters(ctx, "pp", ""); return err },
	"resetCounters":  func(ctx context.Context, c *client.Client) error { return c.ResetCounters(ctx, "pp", "") },
	"recordProxy": func(ctx context.Context, c *client.Client) error {
		_, err := c.Record(ctx, "pp", client.Recording{})
		if err == nil {
			_, _, err = c.RecordAndApply(ctx, "pp", "0123456789abcdef", client.Recording{})
		}
		return err
	},
	"listSessions": func(ctx context.Context, c *client.Client) error { _, err := c.Sessions(ctx); return err },
	"createSession": func(ctx context.Context, c *client.Client) error {
		_, err := c.CreateSession(ctx, client.Session{Proxies: map[string]client.SessionProxy{"pp": {}}})
		return err
	},
	"readSession": func(ctx context.Context, c *client.Client) error { _, err := c.Session(ctx, "s1"); return err },
	"updateSession": func(ctx context.Context, c *client.Client) error {
		_, err := c.UpdateSession(ctx, "s1", client.Session{Proxies: map[string]client.SessionProxy{"pp": {}}}, "0123456789abcdef")
		return err
	},
	"deleteSession": func(ctx context.Context, c *client.Client) error { return c.DeleteSession(ctx, "s1") },
	"reload":        func(ctx context.Context, c *client.Client) error { _, err := c.Reload(ctx); return err },
	"access":        func(ctx context.Context, c *client.Client) error { _, err := c.Access(ctx); return err },
	"schema":        func(ctx context.Context, c *client.Client) error { _, err := c.Schema(ctx); return err },
	"status":        func(ctx context.Context, c *client.Client) error { _, err := c.Status(ctx); return err },
	"listReplicas":  func(ctx context.Context, c *client.Client) error { _, err := c.Replicas(ctx); return err },
	"listRequests": func(ctx context.Context, c *client.Client) error {
		_, err := c.Requests(ctx, client.Filter{})
		return err
	},
	"clearRequests": func(ctx context.Context, c *client.Client) error { return c.ClearRequests(ctx) },
	"streamRequests": func(ctx context.Context, c *client.Client) error {
		s, err := c.StreamRequests(ctx, client.Filter{})
		if err == nil {
			defer s.Close()
			_, err = s.Next()
		}
		return err
	},
	"verifyRequests": func(ctx context.Context, c *client.Client) error {
		_, err := c.Verify(ctx, client.Verification{Count: client.AtLeast(0)})
		return err
	},
}

func TestEveryOperationIsCalledHere(t *testing.T) {
	want := slices.Sorted(maps.Keys(client.Operations()))
	if got := slices.Sorted(maps.Keys(everyCall)); !slices.Equal(got, want) {
		t.Errorf("the calls here: %v\nthe client's operations: %v", got, want)
	}
}

// each runs every call against c and checks its error.
func each(t *testing.T, ctx context.Context, c *client.Client, check func(op string, err error)) {
	t.Helper()
	for _, op := range slices.Sorted(maps.Keys(everyCall)) {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", op, p)
				}
			}()
			check(op, everyCall[op](ctx, c))
		}()
	}
}

func TestAClosedServerIsAnError(t *testing.T) {
	s, err := doppeltest.Start(doppeltest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Client
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	each(t, context.Background(), c, func(op string, err error) {
		if err == nil || !strings.Contains(err.Error(), op) || !strings.Contains(err.Error(), "connect") {
			t.Errorf("%s on a closed server: %v, want a refused connection naming the operation", op, err)
		}
	})
}

func TestABadURLIsAnError(t *testing.T) {
	for _, raw := range []string{"", "::", "127.0.0.1:8081", "ftp://h", "http://", "http://h/?q=1", "http://h/#f", "http://h\x7f"} {
		each(t, context.Background(), client.New(raw), func(op string, err error) {
			if err == nil || !strings.Contains(err.Error(), "admin URL") {
				t.Errorf("%s with %q: %v, want an error about the URL", op, raw, err)
			}
		})
	}
	// Valid: a base path is kept, a trailing slash dropped.
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.Path)
		_, _ = io.WriteString(w, `{"uptime_seconds": 1, "revision": "0123456789abcdef", "seeded": false, "proxies": []}`)
	}))
	defer srv.Close()
	if _, err := client.New(srv.URL + "/doppel/").Status(context.Background()); err != nil || !slices.Equal(got, []string{"/doppel/api/v1/status"}) {
		t.Errorf("a base path: %v, %v", got, err)
	}
}

func TestAnAnswerNotTheAPIsIsAnError(t *testing.T) {
	for _, answer := range []struct {
		name, contentType, body string
		status                  int
	}{
		{"text", "text/plain", "hello", 200},
		{"html error", "text/html", "<html>502 Bad Gateway</html>", 502},
		{"wrong JSON", "application/json", `{"proxies": "nope", "requests": 7, "matched": "x", "sessions": 1, "templates": {}, "counters": 2, "revision": 1, "mocks": 3, "caller": 1, "uptime_seconds": "x", "replicas": {}}`, 200},
		{"empty", "", "", 200},
	} {
		t.Run(answer.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if answer.contentType != "" {
					w.Header().Set("Content-Type", answer.contentType)
				}
				w.WriteHeader(answer.status)
				_, _ = io.WriteString(w, answer.body)
			}))
			defer srv.Close()
			each(t, context.Background(), client.New(srv.URL, client.WithToken("t")), func(op string, err error) {
				var e *client.Error
				if err == nil {
					t.Errorf("%s: no error", op)
				} else if errors.As(err, &e) && e.Code != "" {
					t.Errorf("%s: %v read as Doppel's code %s", op, err, e.Code)
				}
			})
		})
	}
}

func TestACancelledContextIsAnError(t *testing.T) {
	s := doppeltest.New(t, doppeltest.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	each(t, ctx, s.Client, func(op string, err error) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v", op, err)
		}
	})
	each(t, nil, s.Client, func(op string, err error) {
		if err == nil {
			t.Errorf("%s with a nil context: no error", op)
		}
	})
}
