package fault

import (
	"errors"
	"net/http"

	"github.com/doppelproxy/doppel/internal/config"
)

// RollAbort decides an abort.
const RollAbort Roll = 5

func init() {
	register(Kind{
		Name: "abort", Order: 20, Rolls: []Roll{RollAbort},
		Build: func(f config.Faults, mock bool) Fault {
			a := f.Abort
			if a == nil {
				return nil
			}
			at := a.At
			if mock && at == config.AbortAtResponse {
				// A mock has no upstream whose work could happen first
				// (V40 says so at load).
				at = config.AbortAtRequest
			}
			ab := &Abort{Percentage: float64(a.Percentage), At: at, Reset: a.How != config.AbortClose}
			if a.After != nil {
				ab.After = int64(*a.After)
			}
			return ab
		},
	})
}

// Abort cuts the client's connection: before anything goes upstream
// (request), after the upstream's answer was read in full (response), or
// after After bytes of the answer's body (body).
type Abort struct {
	Percentage float64
	At         config.AbortAt
	After      int64
	Reset      bool // a TCP RST; else a FIN
}

func (*Abort) Name() string            { return "abort" }
func (a *Abort) Roll() (Roll, float64) { return RollAbort, a.Percentage }
func (a *Abort) Detail() string        { return string(a.At) }

// Stage: at request it stands in for the answer; otherwise it shapes it.
func (a *Abort) Stage() Stage {
	if a.At == config.AbortAtRequest {
		return Before
	}
	return On
}

func (a *Abort) Act(x Exchange, _ Draw) {
	switch a.At {
	case config.AbortAtRequest:
		x.Cut(a.Reset)
	case config.AbortAtResponse:
		x.Wrap(func(w http.ResponseWriter) http.ResponseWriter { return &swallower{next: w, x: x, reset: a.Reset} })
	default:
		x.Wrap(func(w http.ResponseWriter) http.ResponseWriter {
			return &cutter{next: w, x: x, left: a.After, reset: a.Reset}
		})
	}
}

// errCut is what a write after the cut returns: the answer's writer
// stops there.
var errCut = errors.New("the connection was cut by an injected abort")

// swallower takes the whole answer and sends none of it: the upstream's
// answer is read in full (its side effects happen), then the connection
// is cut when the answer is complete.
type swallower struct {
	next  http.ResponseWriter
	x     Exchange
	reset bool
	cut   bool
}

func (s *swallower) Header() http.Header         { return s.next.Header() }
func (s *swallower) WriteHeader(int)             {}
func (s *swallower) Write(b []byte) (int, error) { return len(b), nil }
func (s *swallower) Flush()                      {}
func (s *swallower) Unwrap() http.ResponseWriter { return s.next }

// Tunnel: on an upgrade, the switch is cut before it reaches the client.
func (s *swallower) Tunnel() (int64, bool) {
	s.cut = true
	return -1, s.reset
}

func (s *swallower) End() {
	if !s.cut {
		s.cut = true
		s.x.Cut(s.reset)
	}
}

// cutter passes the status, the headers and left bytes of body, then
// cuts.
type cutter struct {
	next  http.ResponseWriter
	x     Exchange
	left  int64
	reset bool
	cut   bool
}

func (c *cutter) Header() http.Header         { return c.next.Header() }
func (c *cutter) Unwrap() http.ResponseWriter { return c.next }

func (c *cutter) WriteHeader(code int) {
	c.next.WriteHeader(code)
	if c.left == 0 && code >= 200 {
		c.cutNow()
	}
}

func (c *cutter) Write(b []byte) (int, error) {
	if c.cut {
		return 0, errCut
	}
	if int64(len(b)) < c.left {
		n, err := c.next.Write(b)
		c.left -= int64(n)
		return n, err
	}
	n, err := c.next.Write(b[:c.left])
	c.left -= int64(n)
	if err != nil {
		return n, err
	}
	c.cutNow()
	return n, errCut
}

func (c *cutter) Flush() {
	if !c.cut {
		_ = http.NewResponseController(c.next).Flush()
	}
}

// Tunnel: on an upgrade, the tunnel cuts after left bytes from the
// upstream, and this writer does nothing more.
func (c *cutter) Tunnel() (int64, bool) {
	c.cut = true
	return c.left, c.reset
}

// End cuts an answer whose body was no longer than after: the cut comes
// after it all.
func (c *cutter) End() { c.cutNow() }

func (c *cutter) cutNow() {
	if !c.cut {
		c.cut = true
		c.x.Cut(c.reset)
	}
}
