package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/store/pgtest"
)

// TestTheFleetCountsInOneRow: two replicas' counters of one proxy at one
// revision count in the same rows, one statement a request; another
// revision, proxy or session counts apart; a reset forgets the fleet's
// counts; a new configuration deletes the rows of what it no longer
// serves.
func TestTheFleetCountsInOneRow(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	p := pool(t, url)
	if _, err := Migrate(ctx, p); err != nil {
		t.Fatal(err)
	}
	open := func() *Store {
		s, err := Open(ctx, url, "default", "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open().Counters("shop", "r1", "", fault.MaxCounterKeys), open().Counters("shop", "r1", "", fault.MaxCounterKeys)
	loss := fault.Scope{Mock: "orders", Fault: "loss"}
	long := strings.Repeat("k", 300)
	var got []uint64
	for i, c := range []*Counters{a, b, a, b} {
		n, first, err := c.Count(ctx, loss, long)
		if err != nil || first.IsZero() {
			t.Fatalf("count %d: %v", i, err)
		}
		got = append(got, n)
	}
	if want := []uint64{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("two replicas counted %v, want %v", got, want)
	}
	// Apart: another key, another revision, another session.
	for _, c := range []*Counters{a.s.Counters("shop", "r2", "", 10), a.s.Counters("shop", "r1", "suite-a", 10), a.s.Counters("other", "r1", "", 10)} {
		if n, _, _ := c.Count(ctx, loss, long); n != 1 {
			t.Fatalf("%+v counted with the others: %d", c, n)
		}
	}
	if n, _, _ := a.Count(ctx, loss, long+"x"); n != 1 {
		t.Fatalf("a key of more than 256 bytes was counted as its first 256: %d", n)
	}
	list, err := b.List(ctx, 100)
	if err != nil || len(list) != 2 || list[0].N != 4 || len(list[0].Key) != 256 || list[0].Mock != "orders" || list[0].Fault != "loss" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := a.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := b.Count(ctx, loss, long); n != 1 {
		t.Fatalf("after a reset: %d", n)
	}
	// A configuration that serves shop at r2 only: r1's rows go, and so do
	// those of a session that is not live.
	if err := a.s.KeepCounters(ctx, map[string]string{"shop": "r2"}); err != nil {
		t.Fatal(err)
	}
	var rows []string
	r, _ := p.Query(ctx, `SELECT proxy || ' ' || revision || ' ' || session FROM doppel_counters ORDER BY 1`)
	for r.Next() {
		var s string
		_ = r.Scan(&s)
		rows = append(rows, s)
	}
	r.Close()
	if len(rows) != 1 || rows[0] != "shop r2 " {
		t.Fatalf("rows kept: %q", rows)
	}
}

// TestTheFleetKeepsItsBound: past a proxy's bound of keys, the fleet's
// oldest are deleted, a thousand new keys at a time.
func TestTheFleetKeepsItsBound(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	p := pool(t, url)
	if _, err := Migrate(ctx, p); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, url, "default", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := s.Counters("shop", "r1", "", 10)
	for i := range pruneEvery {
		if _, _, err := c.Count(ctx, fault.Scope{Fault: "loss"}, fmt.Sprint("key-", i)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		var newest bool
		if err := p.QueryRow(ctx, `SELECT count(*), bool_or(key = 'key-999') FROM doppel_counters`).Scan(&n, &newest); err != nil {
			t.Fatal(err)
		}
		if n == 10 && newest {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys kept (the newest among them: %v), want the 10 newest", n, newest)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
