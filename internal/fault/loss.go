package fault

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/config"
)

// RollLoss decides a loss.
const RollLoss Roll = 2

func init() {
	register(Kind{
		Name: "loss", Order: 10, Rolls: []Roll{RollLoss},
		Build: func(f config.Faults, _ bool) Fault {
			if f.Loss == nil {
				return nil
			}
			l := &Loss{Percentage: float64(f.Loss.Percentage), Status: int(f.Loss.Status)}
			if g := f.Loss.GRPCStatus; g != nil {
				l.GRPC, l.GRPCStatus = true, int(*g)
			}
			if f.Loss.RetryAfter != nil {
				l.Headers = append(l.Headers, [2]string{"Retry-After", strconv.FormatInt(int64(*f.Loss.RetryAfter), 10)})
			}
			for _, name := range slices.Sorted(maps.Keys(f.Loss.Headers)) {
				l.Headers = append(l.Headers, [2]string{http.CanonicalHeaderKey(string(name)), string(f.Loss.Headers[name])})
			}
			return l
		},
	})
}

// Loss drops a share of requests with a status, at once: a dropped request
// is never delayed.
type Loss struct {
	Percentage float64
	Status     int
	// Headers are set on the answer (Retry-After, then the document's in
	// name order); the envelope's own framing headers are set after them.
	Headers [][2]string
	// GRPC says a gRPC request is dropped with GRPCStatus; without it,
	// it gets Status and the envelope like any other.
	GRPC       bool
	GRPCStatus int
}

func (*Loss) Name() string            { return "loss" }
func (*Loss) Stage() Stage            { return Before }
func (l *Loss) Roll() (Roll, float64) { return RollLoss, l.Percentage }

// Act answers with the loss status and LOSS_INJECTED; a gRPC request,
// when grpc_status says so, as gRPC fails.
func (l *Loss) Act(x Exchange, _ Draw) {
	h := x.Header()
	for _, kv := range l.Headers {
		h.Set(kv[0], kv[1])
	}
	if l.GRPC && IsGRPC(x.Request()) {
		x.FailGRPC(l.GRPCStatus, fmt.Sprintf("request dropped by injected loss (grpc-status %d)", l.GRPCStatus))
		return
	}
	x.Fail(l.Status, apierr.LossInjected, fmt.Sprintf("request dropped by injected loss (status %d)", l.Status))
}

// IsGRPC reports whether r is a gRPC call: its Content-Type is
// application/grpc, with or without a +codec or the -web variant.
func IsGRPC(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
}

// Fires reports whether this request is dropped.
func (l *Loss) Fires(r Roller, k Key) bool {
	if l == nil {
		return false
	}
	k.Roll = RollLoss
	return Fires(r, k, l.Percentage)
}
