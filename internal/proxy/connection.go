package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
)

// Go's transport deletes an HTTP/1.1 answer's Connection field when it
// says close (net/http's shouldClose), before ReverseProxy reads the names
// in it as hop-by-hop. Those names survive only in the bytes on the wire,
// so the connections NewTransport dials keep the header block of the answer
// they carry, and modifyResponse reads the names from there.

// maxHeaderBlock bounds what one connection keeps of an answer's header
// block; a Connection field past it goes unseen.
const maxHeaderBlock = 64 << 10

// keptBlockCap is the capacity an idle connection may keep for the next
// answer; a larger one (a huge header block, once) is let go when re-armed.
const keptBlockCap = 8 << 10

// headerConn is an upstream HTTP/1 connection that, once armed for a
// request, keeps the bytes of its answer's header block. 1xx blocks are
// skipped, so the final one is kept. Past the block's end, reads pass
// through with one atomic load and no copy.
type headerConn struct {
	net.Conn
	capturing atomic.Bool // armed, and the final block's end not yet read

	// mu guards block: on a reused connection the transport's read loop is
	// already blocked in Read when the next request arms the capture.
	mu    sync.Mutex
	block []byte
}

func (c *headerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.capturing.Load() {
		c.capture(p[:n])
	}
	return n, err
}

// CloseWrite lets an upgraded connection half-close, as the *net.TCPConn
// or *tls.Conn beneath would: ReverseProxy ends the whole exchange when
// the backend cannot.
func (c *headerConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// arm starts keeping the next answer's header block. It is called from
// GotConn, before the request is written, rather than on Write: a request
// body still being written after the answer began must not restart it.
func (c *headerConn) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cap(c.block) > keptBlockCap {
		c.block = nil
	}
	c.block = c.block[:0]
	c.capturing.Store(true)
}

// release lets go of the kept block once the answer has been read: a
// large one entirely, so that no idle connection holds more than
// keptBlockCap for the next answer.
func (c *headerConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.capturing.Store(false)
	if cap(c.block) > keptBlockCap {
		c.block = nil
	} else {
		c.block = c.block[:0]
	}
}

func (c *headerConn) capture(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(b) > 0 && c.capturing.Load() {
		kept := len(c.block)
		// The blank line may straddle two reads.
		from := max(kept-2, 0)
		c.block = append(c.block, b[:min(len(b), maxHeaderBlock-kept)]...)
		end := blockEnd(c.block, from)
		if end < 0 {
			if len(c.block) == maxHeaderBlock {
				c.capturing.Store(false) // too large: keep what was seen
			}
			return
		}
		if !informational(c.block[:end]) {
			c.block = c.block[:end]
			c.capturing.Store(false)
			return
		}
		b = b[end-kept:] // the next block may begin in the same read
		c.block = c.block[:0]
	}
}

// blockEnd is the offset just past the blank line ending a header block
// (lines end in CRLF, or LF as Go's reader also accepts), or -1.
func blockEnd(b []byte, from int) int {
	for {
		i := bytes.IndexByte(b[from:], '\n')
		if i < 0 {
			return -1
		}
		i += from + 1
		switch {
		case i < len(b) && b[i] == '\n':
			return i + 1
		case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
			return i + 2
		}
		from = i
	}
}

// informational reports a 1xx status line other than 101, which Go's
// transport reads past to the final answer.
func informational(block []byte) bool {
	line, _, _ := bytes.Cut(block, []byte("\n"))
	_, status, ok := bytes.Cut(line, []byte(" "))
	return ok && len(status) >= 3 && status[0] == '1' && string(status[:3]) != "101"
}

// dropConnectionNamed deletes from h every header the kept block's
// Connection field lines name, as ReverseProxy's removeHopByHopHeaders
// does with the field when Go's transport leaves it in place.
func (c *headerConn) dropConnectionNamed(h http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.capturing.Load() || informational(c.block) {
		return // the final block's end was not seen: nothing to trust
	}
	lines := c.block
	inConnection := false
	for first := true; ; first = false {
		i := bytes.IndexByte(lines, '\n')
		if i < 0 {
			return // the end, or a line cut by maxHeaderBlock
		}
		line := bytes.TrimSuffix(lines[:i], []byte("\r"))
		lines = lines[i+1:]
		if first {
			continue // the status line
		}
		if len(line) == 0 {
			return
		}
		value := line
		// A line starting with a space or tab continues the field before
		// (obsolete line folding, which Go's reader still joins).
		if line[0] != ' ' && line[0] != '\t' {
			var name []byte
			name, value, _ = bytes.Cut(line, []byte(":"))
			inConnection = bytes.EqualFold(name, []byte("Connection"))
		}
		if !inConnection {
			continue
		}
		for name := range bytes.SplitSeq(value, []byte(",")) {
			if name = bytes.Trim(name, " \t"); len(name) > 0 {
				h.Del(string(name))
			}
		}
	}
}

// gotConn notes which connection serves the exchange and arms it.
// Connections NewTransport did not dial (a caller's own transport, or TLS
// the transport layers itself over a proxy's CONNECT tunnel) are not a
// *headerConn: for them nothing is kept and nothing more is dropped.
func (ex *exchange) gotConn(info httptrace.GotConnInfo) {
	c, _ := info.Conn.(*headerConn)
	if c != nil {
		c.arm()
	}
	ex.upstreamConn = c
}

// dialHeaderConn dials plain upstreams (and HTTP proxies) for NewTransport.
func dialHeaderConn(d *net.Dialer) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &headerConn{Conn: c}, nil
	}
}

// dialTLS dials https upstreams for NewTransport, so the header block is
// kept above TLS. It does what the transport's own TLS dial would: t's
// TLSClientConfig (whose NextProtos the transport has set to h2 and
// http/1.1 before its first dial), the server name from addr, and t's
// TLSHandshakeTimeout. An h2 connection is returned bare: HTTP/2 has no
// Connection field, and the transport speaks h2 only over a *tls.Conn.
// (The transport records TLS state only for a bare *tls.Conn, so an
// HTTP/1 answer over TLS has res.TLS nil; nothing here reads it.)
func dialTLS(t *http.Transport, d *net.Dialer) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cfg := new(tls.Config)
		if t.TLSClientConfig != nil {
			cfg = t.TLSClientConfig.Clone()
		}
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			cfg.ServerName = host
		}
		if requiresHTTP1(ctx) {
			cfg.NextProtos = nil
		}
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if t.TLSHandshakeTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, t.TLSHandshakeTimeout)
			defer cancel()
		}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		switch tc.ConnectionState().NegotiatedProtocol {
		case "", "http/1.1":
			return &headerConn{Conn: tc}, nil
		}
		return tc, nil
	}
}

// The transport dials a WebSocket upgrade apart, without h2 in ALPN
// (net/http's requiresHTTP1), since HTTP/2 cannot carry it; dialTLS must
// too, and learns it from the request context.
type http1OnlyKey struct{}

func withHTTP1Only(ctx context.Context, h http.Header) context.Context {
	if hasToken(h["Connection"], "upgrade") && strings.EqualFold(h.Get("Upgrade"), "websocket") {
		return context.WithValue(ctx, http1OnlyKey{}, true)
	}
	return ctx
}

func requiresHTTP1(ctx context.Context) bool {
	return ctx.Value(http1OnlyKey{}) != nil
}

// hasToken reports whether a comma-separated field names token.
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.Trim(t, " \t"), token) {
				return true
			}
		}
	}
	return false
}
