package tcp

import (
	"net"
	"net/http"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/fault"
)

// A Doppel tcp proxy's faults (SPEC §17.8), rolled per connection at
// accept, in the order of the HTTP proxy's: abort at request and hang
// stand in for the connection; latency, bandwidth and abort at body shape
// its bytes.

// Planner plans the connections of one configured tcp proxy.
type Planner struct {
	proxy    string
	roller   fault.Roller
	counters *fault.Counters
	abort    *config.Abort
	hang     *config.Hang
	latency  *config.Latency
	band     *config.Bandwidth
	when     map[string]*fault.Condition
}

// NewPlanner compiles p's faults; counters keep its when counts.
func NewPlanner(p *config.Proxy, roller fault.Roller, counters *fault.Counters) *Planner {
	if roller == nil {
		roller = fault.Random{}
	}
	pl := &Planner{proxy: string(p.Name), roller: roller, counters: counters,
		abort: p.Abort, hang: p.Hang, latency: p.Latency, band: p.Bandwidth, when: map[string]*fault.Condition{}}
	for name, w := range map[string]*config.When{"abort": whenOfAbort(p.Abort), "hang": whenOfHang(p.Hang),
		"latency": whenOfLatency(p.Latency), "bandwidth": whenOfBandwidth(p.Bandwidth)} {
		if w != nil {
			pl.when[name] = fault.NewCondition(w, "", name, counters)
		}
	}
	return pl
}

// Rolls of a connection's faults, distinct from an HTTP request's.
const (
	rollAbort fault.Roll = 20 + iota
	rollHang
	rollLatency
	rollBandwidth
)

// fires rolls the fault of that name for a connection from client.
func (pl *Planner) fires(name string, roll fault.Roll, share float64, client *http.Request, now time.Time) bool {
	if c := pl.when[name]; c != nil {
		if admits, _ := c.Admits(client, now); !admits {
			return false
		}
	}
	return fault.Fires(pl.roller, fault.Key{Proxy: pl.proxy, Roll: roll}, share)
}

// Plan is the plan of one connection.
func (pl *Planner) Plan(client net.Addr) Plan {
	now := time.Now()
	// The conditions read what a request would carry: here only the
	// client's address (per: {client: ip}).
	r := &http.Request{RemoteAddr: client.String(), Header: http.Header{}}
	var plan Plan
	if a := pl.abort; a != nil && a.At == config.AbortAtRequest && pl.fires("abort", rollAbort, float64(a.Percentage), r, now) {
		plan.Cut, plan.Close, plan.Faults = true, a.How == config.AbortClose, []string{"abort"}
		return plan
	}
	if h := pl.hang; h != nil && pl.fires("hang", rollHang, float64(h.Percentage), r, now) {
		plan.Hang, plan.Faults = time.Duration(float64(h.Seconds)*float64(time.Second)), []string{"hang"}
		return plan
	}
	var up, down []Entry
	if l := pl.latency; l != nil && pl.fires("latency", rollLatency, float64(l.Percentage), r, now) {
		lt := Latency{Base: seconds(float64(l.Min)), BaseMax: seconds(float64(l.Max))}
		if l.Jitter != nil {
			lt.Jitter = seconds(float64(*l.Jitter))
		}
		// The delay is the connection's, on every chunk from the upstream
		// (what the client waits on) from the moment it arrived; jitter on
		// both ways.
		down = append(down, Entry{Toxic: lt, Toxicity: 1})
		if lt.Jitter > 0 {
			up = append(up, Entry{Toxic: Latency{Jitter: lt.Jitter}, Toxicity: 1})
		}
		plan.Faults = append(plan.Faults, "latency")
	}
	if b := pl.band; b != nil && pl.fires("bandwidth", rollBandwidth, float64(b.Percentage), r, now) {
		bw := Entry{Toxic: Bandwidth{BytesPerSecond: int64(b.BytesPerSecond)}, Toxicity: 1}
		up, down = append(up, bw), append(down, bw)
		plan.Faults = append(plan.Faults, "bandwidth")
	}
	if a := pl.abort; a != nil && a.At == config.AbortAtBody && pl.fires("abort", rollAbort, float64(a.Percentage), r, now) {
		after := int64(0)
		if a.After != nil {
			after = int64(*a.After)
		}
		cut := Entry{Toxic: LimitData{Bytes: after, Close: a.How == config.AbortClose}, Toxicity: 1}
		up, down = append(up, cut), append(down, cut)
		plan.Faults = append(plan.Faults, "abort")
	}
	if up != nil || down != nil {
		plan.Toxics = &Toxics{Up: up, Down: down}
	}
	return plan
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func whenOfAbort(a *config.Abort) *config.When {
	if a == nil {
		return nil
	}
	return a.When
}

func whenOfHang(h *config.Hang) *config.When {
	if h == nil {
		return nil
	}
	return h.When
}

func whenOfLatency(l *config.Latency) *config.When {
	if l == nil {
		return nil
	}
	return l.When
}

func whenOfBandwidth(b *config.Bandwidth) *config.When {
	if b == nil {
		return nil
	}
	return b.When
}
