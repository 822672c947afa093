package fault

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
)

// TestCountersCountEachKeyOnce: concurrent counting loses and doubles
// nothing; scopes are apart; the newest MaxCounterKeys keys are kept.
func TestCountersCountEachKeyOnce(t *testing.T) {
	c := NewCounters()
	loss, abort := &Scope{Fault: "loss"}, &Scope{Mock: "m", Fault: "loss"}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 500 {
				c.count(loss, fmt.Sprint("k", (i+g)%50), time.Now())
			}
		})
	}
	wg.Wait()
	c.count(abort, "k1", time.Now())
	byKey := map[string]uint64{}
	for _, n := range c.list() {
		byKey[n.Mock+"/"+n.Key] = n.N
	}
	for k := range 50 {
		if n := byKey[fmt.Sprint("/k", k)]; n != 32*10 {
			t.Fatalf("k%d counted %d times, want %d", k, n, 32*10)
		}
	}
	if byKey["m/k1"] != 1 {
		t.Errorf("another scope shares the count: %d", byKey["m/k1"])
	}
	// A new runtime's counters adopt the old ones; a reset empties them.
	next := NewCounters()
	next.Adopt(c)
	if n, _ := next.count(loss, "k0", time.Now()); n != 321 {
		t.Errorf("adopted: %d", n)
	}
	next.Reset(context.Background())
	if n, _ := next.count(loss, "k0", time.Now()); n != 1 || len(next.list()) != 1 {
		t.Errorf("after a reset: %d, %d kept", n, len(next.list()))
	}
}

func TestCountersForgetTheOldestFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("counts 100,000 keys")
	}
	c := NewCounters()
	s := &Scope{Fault: "loss"}
	for i := range MaxCounterKeys {
		c.count(s, fmt.Sprint(i), time.Now())
	}
	if c.Forgot() {
		t.Fatal("forgot before the bound")
	}
	c.count(s, "one more", time.Now())
	if !c.Forgot() || c.Forgot() {
		t.Error("Forgot says so once")
	}
	if n, _ := c.count(s, "0", time.Now()); n != 1 {
		t.Errorf("the oldest key was kept: %d", n)
	}
	if n, _ := c.count(s, fmt.Sprint(MaxCounterKeys-1), time.Now()); n != 2 {
		t.Errorf("a newer key was forgotten: %d", n)
	}
	if got := len(c.list()); got != MaxCounterKeys {
		t.Errorf("%d kept, want %d", got, MaxCounterKeys)
	}
}

// TestEveryConditionCountsTheRequest: a request that a loss stops is
// still counted by the abort's condition after it (the count is of the
// requests its headers admit).
func TestEveryConditionCountsTheRequest(t *testing.T) {
	counters := NewCounters()
	drop, _ := config.ParsePattern(".")
	one := config.CountN(1)
	set := Set{
		condition(&Loss{Percentage: 1, Status: 503}, &config.When{Headers: map[config.HeaderName]config.Pattern{"X-Drop": drop}}, "", "loss", counters),
		condition(&Abort{Percentage: 1, At: config.AbortAtRequest}, &config.When{Count: &config.Count{First: &one}}, "", "abort", counters),
	}
	send := func(header http.Header) *recorder {
		x := &recorder{ResponseRecorder: httptest.NewRecorder(), req: &http.Request{Header: header}}
		set.Inject(Random{}, Key{Proxy: "zeta"}, x)
		return x
	}
	if x := send(http.Header{"X-Drop": {"1"}}); fmt.Sprint(x.fired) != "[loss]" {
		t.Fatalf("first: %v", x.fired)
	}
	if x := send(http.Header{}); x.cut || len(x.fired) != 0 {
		t.Errorf("second: the abort's first request was the first, which the loss stopped: fired %v, cut %v", x.fired, x.cut)
	}
}

// TestAResetReachesTheAdopter: a reset through the counters a reload is
// replacing also resets those replacing them.
func TestAResetReachesTheAdopter(t *testing.T) {
	old, next := NewCounters(), NewCounters()
	s := &Scope{Fault: "loss"}
	old.count(s, "k", time.Now())
	next.Adopt(old)
	old.Reset(context.Background())
	if n, _ := next.count(s, "k", time.Now()); n != 1 {
		t.Errorf("after a reset through the old counters: %d", n)
	}
}

// stalled are fleet counters that answer after after, or fail.
type stalled struct {
	after time.Duration
	err   error
	n     uint64
	asked int
}

func (s *stalled) Count(ctx context.Context, _ Scope, _ string) (uint64, time.Time, error) {
	s.asked++
	select {
	case <-time.After(s.after):
	case <-ctx.Done():
		return 0, time.Time{}, ctx.Err()
	}
	if s.err != nil {
		return 0, time.Time{}, s.err
	}
	s.n++
	return s.n, time.Unix(0, 0), nil
}
func (s *stalled) List(context.Context, uint64) ([]Count, error) { return nil, s.err }
func (s *stalled) Reset(context.Context) error                   { return s.err }

// TestSharedCountersFallBackInTime: counters shared with a fleet count in
// its counters; when those do not answer within the timeout, the count is
// kept here, said Local, and the outage reported once; while it lasts the
// fleet is not asked, the others counting here at once, until a probe a
// second later finds it answering again.
func TestSharedCountersFallBackInTime(t *testing.T) {
	scope := &Scope{Fault: "loss"}
	var reported []bool
	b := NewBreaker(50*time.Millisecond, func(down bool, _ error) { reported = append(reported, down) })
	c := NewCounters()
	fleet := &stalled{}
	c.Share(fleet, b)
	if n, _, where := c.Count(context.Background(), scope, "k", time.Now()); n != 1 || where != Fleet {
		t.Fatalf("the fleet's first: %d %v", n, where)
	}
	fleet.after = time.Hour
	start := time.Now()
	n, _, where := c.Count(context.Background(), scope, "k", time.Now())
	if took := time.Since(start); where != Local || n != 1 || took > 2*time.Second {
		t.Fatalf("a stalled fleet: %d %v after %v", n, where, took)
	}
	asked := fleet.asked
	for range 5 {
		if _, _, where := c.Count(context.Background(), scope, "k", time.Now()); where != Local {
			t.Fatalf("during the outage: %v", where)
		}
	}
	if fleet.asked != asked {
		t.Fatalf("the fleet was asked %d times during the outage, before a second passed", fleet.asked-asked)
	}
	fleet.after = 0
	b.probeAt.Store(time.Now().UnixNano()) // a second later
	if n, _, where := c.Count(context.Background(), scope, "k", time.Now()); where != Fleet || n != 2 {
		t.Fatalf("the probe after the outage: %d %v", n, where)
	}
	if len(reported) != 2 || !reported[0] || reported[1] {
		t.Fatalf("reported %v, want down then up", reported)
	}
	fleet.err = errors.New("connection refused")
	if _, err := c.List(context.Background()); err == nil {
		t.Fatal("a list of a failing fleet's counters did not fail")
	}
	if Local.String() != "local" || Fleet.String() != "fleet" || Here.String() != "" {
		t.Fatal("Where's names")
	}
}
