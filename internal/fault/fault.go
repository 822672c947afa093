// Package fault holds the deliberate degradations and the rolls that decide
// them. A fault is one value behind one interface, in a file of its own,
// registered by kind: it says where it acts (Stage) and how it rolls
// (Roll); the caller rolls it once, in the fixed order of the kinds, and
// only then lets it act. The request pipeline calls the stages and never
// names a fault.
//
// Every roll goes through a Roller keyed by what is being decided, so that
// a seeded Roller can make faults a pure function of the request (a
// replayed request id gets the same faults) without the pipeline changing.
package fault

import (
	"context"
	"net/http"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
)

// Stage is where a fault acts on a request it fired on.
type Stage uint8

const (
	// Before: in place of the answer. The fault answers (or cuts or
	// holds the connection) itself; neither a mock nor the upstream is reached, the
	// faults after it are not rolled, and nothing delays it.
	Before Stage = iota + 1
	// On: on the answer, by wrapping the writer the answer goes through.
	On
	// After: the last step before the answer's headers leave, a wait
	// counted from the request's arrival.
	After
)

// Fault is one deliberate degradation, declared on a proxy or a mock.
type Fault interface {
	// Name is the fault's key in the document, and its name in the log
	// line and the metrics.
	Name() string
	// Stage says where it acts.
	Stage() Stage
	// Roll is the draw that decides whether it fires, and the share of
	// requests it fires on (0..1).
	Roll() (Roll, float64)
	// Act applies it to a request it fired on. draw makes the further
	// draws a fault needs (a delay), keyed like the roll that fired.
	Act(x Exchange, draw Draw)
}

// Draw makes a fault's further draws, keyed like the roll that fired it.
type Draw struct {
	r Roller
	k Key
}

// Float64 returns a number in [0, 1) for the draw named by roll.
func (d Draw) Float64(roll Roll) float64 {
	d.k.Roll = roll
	return d.r.Float64(d.k)
}

// Exchange is the request a fault acts on, as the pipeline shows it.
type Exchange interface {
	// ResponseWriter is the answer's writer: a Before fault answers here.
	http.ResponseWriter
	// Fail answers with Doppel's error envelope under the given status.
	Fail(status int, code apierr.Code, message string)
	// FailGRPC answers a gRPC call as gRPC fails: HTTP 200 and the
	// trailers-only form, grpc-status and grpc-message in the header.
	FailGRPC(status int, message string)
	// Delay makes d the target for the whole response: the answer's
	// headers wait until d after the request arrived.
	Delay(d time.Duration)
	// Wrap puts a writer of the fault's in front of the answer's: an On
	// fault shapes what the answer writes. The wrapper must have an
	// Unwrap() http.ResponseWriter returning what it wraps, so that
	// flushing and deadlines (http.ResponseController) reach the
	// connection through it.
	Wrap(func(http.ResponseWriter) http.ResponseWriter)
	// Fired records that the fault of that name fired (the log line, the
	// metrics, the journal); detail is what its Detail says, if anything.
	Fired(name, detail string)
	// Counted records where the request's conditions were counted, when
	// they were shared with a fleet (the journal's counter).
	Counted(where Where)
	// Cut cuts the client's connection now, sending what the answer
	// wrote so far and nothing more: reset with a TCP RST, else a FIN.
	// On HTTP/2 the stream is reset and the connection kept. A cut before
	// anything reached the client is logged as 444.
	Cut(reset bool)
	// Hang leaves the request unanswered for d, or until the client
	// leaves, then closes the connection with a FIN. It may return before
	// then, the request handed to a goroutine of its own: the handler
	// returns and nothing more is written.
	Hang(d time.Duration)
	// Context is the request's: done when the client leaves.
	Context() context.Context
	// Request is the request as the client sent it: what a fault's
	// condition reads.
	Request() *http.Request
}

// A Detailed fault says more of how it fired than its name: where an
// abort cuts. The record keeps it beside the name.
type Detailed interface {
	Detail() string
}

// An Ender is a writer of an On fault that acts when the answer is
// complete (an abort that swallowed the answer cuts then): the pipeline
// calls End once the handler has written everything, before the request
// is recorded.
type Ender interface {
	End()
}

// Set is the faults that apply to a request, in the fixed order of their
// kinds.
type Set []Fault

// Inject rolls each fault of the set in order and lets each one that
// fires act, after telling x its name. It reports whether a Before fault
// answered, which stops the rest.
func (s Set) Inject(r Roller, k Key, x Exchange) (answered bool) {
	// Every condition counts the request first, whatever fires: a count
	// is of the requests its headers admit, not of those that reached it.
	// The faults a condition bars: a bit each for the first 64, which is
	// every set a document makes, and a slice past them.
	var barred uint64
	var barredPast []bool
	var now time.Time
	counted := Here
	for i, f := range s {
		c, ok := f.(*conditioned)
		if !ok {
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		admits, where := c.when.Admits(x.Request(), now)
		counted = max(counted, where) // one count kept locally makes the request's local
		switch {
		case admits:
		case i < 64:
			barred |= 1 << i
		default:
			if barredPast == nil {
				barredPast = make([]bool, len(s))
			}
			barredPast[i] = true
		}
	}
	if counted != Here {
		x.Counted(counted)
	}
	for i, f := range s {
		if i < 64 && barred&(1<<i) != 0 || i >= 64 && barredPast != nil && barredPast[i] {
			continue
		}
		roll, share := f.Roll()
		k.Roll = roll
		if !Fires(r, k, share) {
			continue
		}
		detail := ""
		if d, ok := f.(Detailed); ok {
			detail = d.Detail()
		}
		x.Fired(f.Name(), detail)
		f.Act(x, Draw{r: r, k: k})
		if f.Stage() == Before {
			return true
		}
	}
	return false
}
