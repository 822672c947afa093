package proxy

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppelproxy/doppel/internal/telemetry"
)

// An upgraded connection (a WebSocket, SPEC §17.7): once the upstream
// answers 101 Switching Protocols, ReverseProxy takes the client's
// connection through Hijack and relays bytes both ways until either side
// closes. The handshake is an exchange like any other (resolution,
// confinement, headers, loss, latency); what follows is the tunnel,
// counted here, cut here by an abort at body, and recorded when it
// closes.

// errCutBeforeSwitch ends an upgrade an abort at response cut: the
// upstream switched, the client never learns it did.
var errCutBeforeSwitch = errors.New("the connection was cut by an injected abort before the switch reached the client")

// tunnelCut is a fault's writer that hands its cut to the tunnel: after
// bytes from the upstream pass, or none at all (-1: before the switch is
// sent). The writer does nothing more afterwards.
type tunnelCut interface {
	Tunnel() (after int64, reset bool)
}

// tunnelCutOf finds the cut a fault put in front of the answer, if any.
func (ex *exchange) tunnelCutOf() (after int64, reset, ok bool) {
	for w := ex.w; w != nil && w != ex.conn; {
		if tc, is := w.(tunnelCut); is {
			after, reset = tc.Tunnel()
			return after, reset, true
		}
		u, is := w.(interface{ Unwrap() http.ResponseWriter })
		if !is {
			break
		}
		w = u.Unwrap()
	}
	return 0, false, false
}

// switchProtocols prepares the switch ReverseProxy is about to write:
// the proxy's timeout bounded the exchange, which is over, and not the
// tunnel; the latency applies to the handshake; the 101 carries the
// request id and receipt as any answer does.
func (ex *exchange) switchProtocols() {
	if ex.timeout != nil {
		ex.timeout.Stop()
	}
	ex.waitLatency()
	ex.w.Header().Set(headerRequestID, ex.rec.RequestID)
	ex.rec.Status = http.StatusSwitchingProtocols
	if ex.wantsReceipt() {
		ex.w.Header().Set(headerReceipt, receipt(&ex.rec))
	}
}

// tunnelOn wraps the client's connection of a switch.
func (ex *exchange) tunnelOn(c net.Conn, brw *bufio.ReadWriter) (net.Conn, *bufio.ReadWriter, error) {
	t := &tunnel{Conn: c, began: time.Now(), left: -1}
	if after, reset, ok := ex.tunnelCutOf(); ok {
		if after < 0 {
			ex.to(answerCut)
			ex.rec.Status = statusCut
			closeConn(c, reset)
			return nil, nil, errCutBeforeSwitch
		}
		t.left, t.reset = after, reset
		ex.to(answerCut) // the fault's writer is done; the tunnel cuts
	}
	ex.tunnel = t
	return t, brw, nil
}

// tunnel is the client's side of an upgraded connection.
type tunnel struct {
	net.Conn
	began    time.Time
	up, down atomic.Int64

	// left is how many bytes from the upstream may still pass before the
	// cut, -1 when none is due; written only by the upstream's copier.
	left  int64
	reset bool

	closeOnce sync.Once
	ended     atomic.Int64 // when it closed, in ns since began; 0 while open
}

// Read is what the client sends toward the upstream.
func (t *tunnel) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	t.up.Add(int64(n))
	return n, err
}

// Write is what the upstream sends toward the client.
func (t *tunnel) Write(p []byte) (int, error) {
	if t.left < 0 {
		n, err := t.Conn.Write(p)
		t.down.Add(int64(n))
		return n, err
	}
	pass := min(int64(len(p)), t.left)
	n, err := t.Conn.Write(p[:pass])
	t.down.Add(int64(n))
	t.left -= int64(n)
	if err != nil {
		return n, err
	}
	if int64(len(p)) > pass {
		t.cut()
		return n, errCut
	}
	return n, nil
}

// errCut is what a write after an injected cut returns.
var errCut = errors.New("the tunnel was cut by an injected abort")

func (t *tunnel) cut() {
	t.closeOnce.Do(func() {
		t.ended.Store(int64(max(time.Since(t.began), 1)))
		closeConn(t.Conn, t.reset)
	})
}

func (t *tunnel) Close() error {
	var err error
	t.closeOnce.Do(func() {
		t.ended.Store(int64(max(time.Since(t.began), 1)))
		err = t.Conn.Close()
	})
	return err
}

// NetConn is the connection under the wrapper.
func (t *tunnel) NetConn() net.Conn { return t.Conn }

// CloseWrite passes the upstream's end of its half on to the client.
func (t *tunnel) CloseWrite() error {
	if cw, ok := t.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// record is what the tunnel carried, for the request's record.
func (t *tunnel) record() *telemetry.Tunnel {
	d := time.Duration(t.ended.Load())
	if d == 0 {
		d = time.Since(t.began)
	}
	return &telemetry.Tunnel{Up: t.up.Load(), Down: t.down.Load(), Duration: d}
}
