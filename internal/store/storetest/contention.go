package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/store"
)

// Contention is compare-and-swap under contention: 50 writers at once, each
// a read-modify-write loop (Load, edit, Save with the loaded revision, again
// on ErrRevisionMismatch) that sets a header on its own proxy AND adds its
// own header to one shared proxy. At the end the stored document holds
// every write that succeeded and nothing else: no update is lost, none is
// invented, no other proxy moved.
func Contention(t *testing.T, open Open) {
	t.Parallel() // parsing 51 proxies hundreds of times takes a while
	const (
		writers  = 50
		attempts = 2000
	)
	ctx := context.Background()
	var b strings.Builder
	b.WriteString("server: {host: 127.0.0.1, port: 8080}\nadmin: {host: 127.0.0.1, port: 8081}\nproxies:\n")
	b.WriteString("  - name: shared\n    type: http\n    url: http://127.0.0.1:9000\n    resolve: {type: header, header: X-Backend}\n    headers: {X-Base: base}\n")
	for i := range writers {
		fmt.Fprintf(&b, "  - name: own-%d\n    type: http\n    url: http://127.0.0.1:9000\n    resolve: {type: header, header: X-Backend}\n", i)
	}
	s := open(t, []byte(b.String()))
	t0 := time.Now()
	if _, err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("one Load takes %v", time.Since(t0))

	proxy := func(doc *config.Document, name string) *config.Proxy {
		for i := range doc.Proxies {
			if string(doc.Proxies[i].Name) == name {
				return &doc.Proxies[i]
			}
		}
		return nil
	}

	var wg sync.WaitGroup
	ok := make([]bool, writers)
	tries := make([]int, writers)
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range attempts {
				tries[i] = a + 1
				snap, err := s.Load(ctx)
				if err != nil {
					errs[i] = fmt.Errorf("loading: %w", err)
					return
				}
				own, shared := proxy(snap.Document, fmt.Sprintf("own-%d", i)), proxy(snap.Document, "shared")
				if own == nil || shared == nil {
					errs[i] = fmt.Errorf("a proxy vanished from the stored document")
					return
				}
				if own.Headers == nil {
					own.Headers = map[config.HeaderName]config.HeaderValue{}
				}
				own.Headers["X-Own"] = config.HeaderValue(fmt.Sprintf("own-w%d", i))
				if shared.Headers == nil {
					shared.Headers = map[config.HeaderName]config.HeaderValue{}
				}
				shared.Headers[config.HeaderName(fmt.Sprintf("X-W%d", i))] = config.HeaderValue(fmt.Sprintf("w%d", i))
				_, err = s.Save(ctx, snap.Document, snap.Revision)
				if err == nil {
					ok[i] = true
					return
				}
				if !errors.Is(err, store.ErrRevisionMismatch) {
					errs[i] = fmt.Errorf("saving: %w", err)
					return
				}
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			}
		}()
	}
	wg.Wait()

	won, total := 0, 0
	for i := range writers {
		if errs[i] != nil {
			t.Errorf("writer %d: %v", i, errs[i])
		}
		if ok[i] {
			won++
		}
		total += tries[i]
	}
	t.Logf("%d of %d writers succeeded in %d attempts in all", won, writers, total)
	if won == 0 {
		t.Fatal("no writer succeeded")
	}

	snap, err := s.Load(ctx)
	if err != nil {
		t.Fatalf("final Load: %v", err)
	}
	doc := snap.Document
	if len(doc.Proxies) != writers+1 {
		t.Errorf("%d proxies stored, want %d", len(doc.Proxies), writers+1)
	}
	shared := proxy(doc, "shared")
	if shared == nil {
		t.Fatal("the shared proxy is gone")
	}
	want := map[config.HeaderName]config.HeaderValue{"X-Base": "base"}
	for i := range writers {
		if ok[i] {
			want[config.HeaderName(fmt.Sprintf("X-W%d", i))] = config.HeaderValue(fmt.Sprintf("w%d", i))
		}
	}
	for k, v := range want {
		if got, has := lookupHeader(shared.Headers, k); !has || got != v {
			t.Errorf("shared proxy: %s = %q (present %v), want %q: a successful write was lost", k, got, has, v)
		}
	}
	if len(shared.Headers) != len(want) {
		t.Errorf("shared proxy has %d headers, want %d (only successful writes): %v", len(shared.Headers), len(want), shared.Headers)
	}
	for i := range writers {
		own := proxy(doc, fmt.Sprintf("own-%d", i))
		if own == nil {
			t.Errorf("proxy own-%d is gone", i)
			continue
		}
		got, has := lookupHeader(own.Headers, "X-Own")
		switch {
		case ok[i] && (!has || string(got) != fmt.Sprintf("own-w%d", i)):
			t.Errorf("own-%d: X-Own = %q (present %v) after a successful write: lost update", i, got, has)
		case !ok[i] && has:
			t.Errorf("own-%d: X-Own = %q although its write never succeeded", i, got)
		case len(own.Headers) > 1:
			t.Errorf("own-%d: unexpected headers %v", i, own.Headers)
		}
	}
}

// lookupHeader finds a header case-insensitively (a store may canonicalise
// header names).
func lookupHeader(h map[config.HeaderName]config.HeaderValue, name config.HeaderName) (config.HeaderValue, bool) {
	for k, v := range h {
		if strings.EqualFold(string(k), string(name)) {
			return v, true
		}
	}
	return "", false
}
