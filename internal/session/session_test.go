package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/runtime"
)

const doc = `server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081}
proxies:
  - {name: shop, type: http, url: "http://127.0.0.1:9/"}
  - {name: other, type: http, url: "http://127.0.0.1:9/", resolve: {type: header, header: X-B}}
`

func registry(t *testing.T, src string) (*Registry, *time.Time) {
	t.Helper()
	d, err := config.Load([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.Compile(d)
	if err != nil {
		t.Fatal(err)
	}
	r := New(rt, slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	return r, &now
}

func spec(t *testing.T, r *Registry, body string) *config.Session {
	t.Helper()
	s, err := config.ParseSession([]byte(body), r.rt.Document)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSessionsExpireAndAreBounded(t *testing.T) {
	r, now := registry(t, doc)
	s, err := r.Create(context.Background(), spec(t, r, `{"ttl": 5, "proxies": {"shop": {"loss": {"percentage": 1, "status": 503}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Lookup(s.ID, "shop") == nil || r.Lookup(s.ID, "other") != nil || !r.Any() {
		t.Fatal("the overlay is not where it was laid")
	}
	*now = now.Add(5 * time.Second)
	if r.Lookup(s.ID, "shop") != nil {
		t.Error("an expired session still applies, before the timer removed it")
	}
	if d := r.expire(); d != time.Hour || r.Any() {
		t.Errorf("after expiry: next in %v, any %v", d, r.Any())
	}
	for i := range MaxLive {
		if _, err := r.Create(context.Background(), spec(t, r, fmt.Sprintf(`{"id": "s-%d", "proxies": {"shop": {}}}`, i)), nil); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	if _, err := r.Create(context.Background(), spec(t, r, `{"proxies": {"shop": {}}}`), nil); !errors.Is(err, ErrFull) {
		t.Errorf("session %d: %v", MaxLive+1, err)
	}
	if _, err := r.Create(context.Background(), spec(t, r, `{"id": "s-1", "proxies": {"shop": {}}}`), nil); !errors.Is(err, ErrExists) && !errors.Is(err, ErrFull) {
		t.Errorf("a duplicate id: %v", err)
	}
}

// TestSessionsFollowTheConfiguration: an overlay is compiled again over
// the proxy now in force; one whose proxy is gone no longer applies.
func TestSessionsFollowTheConfiguration(t *testing.T) {
	r, _ := registry(t, doc)
	s, err := r.Create(context.Background(), spec(t, r, `{"proxies": {"shop": {}, "other": {}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := config.Load([]byte(`server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081}
proxies:
  - {name: shop, type: http, url: "http://127.0.0.1:10/"}
`))
	rt, _ := runtime.Compile(d)
	r.Recompile(rt)
	if p := r.Lookup(s.ID, "shop"); p == nil || p.Upstream.Port() != "10" {
		t.Errorf("shop's overlay: %+v", p)
	}
	if r.Lookup(s.ID, "other") != nil {
		t.Error("an overlay outlived its proxy")
	}
}

// TestCountsSurviveWhatDoesNotChangeThem: a reload that leaves an overlay
// as it was keeps its counts; a sync that brings the same revision keeps
// the session as it was.
func TestCountsSurviveWhatDoesNotChangeThem(t *testing.T) {
	r, _ := registry(t, doc)
	s, err := r.Create(context.Background(), spec(t, r, `{"proxies": {"shop": {"loss": {"percentage": 1, "status": 503, "when": {"count": {"first": 1}}}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	scope := &fault.Scope{Fault: "loss"}
	r.Lookup(s.ID, "shop").Counters.Count(context.Background(), scope, "", time.Now())
	r.Recompile(r.rt)
	if n, _, _ := r.Lookup(s.ID, "shop").Counters.Count(context.Background(), scope, "", time.Now()); n != 2 {
		t.Errorf("after a reload: count %d, want 2", n)
	}
}

// TestAnIDIsNeverTakenForAFlag: a generated id never begins with `-`, so
// `doppel sessions end ID` reads it as the id (1 in 64 did).
func TestAnIDIsNeverTakenForAFlag(t *testing.T) {
	for range 5000 {
		if id := newID(); len(id) != 22 || id[0] == '-' {
			t.Fatalf("%q", id)
		}
	}
}
