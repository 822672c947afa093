package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/store/pgtest"
)

// BenchmarkFleetCount is what a counted request adds with the PostgreSQL
// store (SPEC §18.1): one statement, by three replicas (three stores, each
// its own pool) at once, over 1,000 keys; p50 and p99 are of one count.
func BenchmarkFleetCount(b *testing.B) {
	ctx := context.Background()
	url := pgtest.URL(b)
	var replicas []*Counters
	for range 3 {
		s, err := Open(ctx, url, "default", "")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		if len(replicas) == 0 {
			if _, err := Migrate(ctx, s.Pool()); err != nil {
				b.Fatal(err)
			}
		}
		replicas = append(replicas, s.Counters("shop", "0123456789abcdef", "", fault.MaxCounterKeys))
	}
	scope := fault.Scope{Mock: "orders", Fault: "loss"}
	var next atomic.Uint64
	took := make(chan []time.Duration, 64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			i := next.Add(1)
			start := time.Now()
			if _, _, err := replicas[i%3].Count(ctx, scope, fmt.Sprint("order-", i%1000)); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(start))
		}
		took <- mine
	})
	b.StopTimer()
	close(took)
	var all []time.Duration
	for d := range took {
		all = append(all, d...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
		b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "counts/s")
	}
}
