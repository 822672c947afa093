package main

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/doppelproxy/doppel/internal/certs/certstest"
)

// An abort at body is one behaviour per protocol, whatever carries it:
// on HTTP/1.1, in the clear or over TLS, the status, the headers and
// `after` bytes, then the connection cut (a reset, or with how: close the
// end of the connection); on HTTP/2, h2c or h2 over TLS, the HEADERS and
// `after` bytes of DATA, then RST_STREAM on that stream, and the
// connection serves the next request.

func abortProxies(up string) string {
	return fmt.Sprintf(`proxies:
  - name: cuts
    type: http
    url: %s/
    abort: {percentage: 1, at: body, after: 1Ki}
    mocks:
      - name: reset
        request: {method: GET, url: "^/mock/reset$"}
        response: {status: 200, body: "0123456789abcdefghij"}
        proxy: {abort: {percentage: 1, at: body, after: 5}}
      - name: close
        request: {method: GET, url: "^/mock/close$"}
        response: {status: 200, body: "0123456789abcdefghij"}
        proxy: {abort: {percentage: 1, at: body, after: 5, how: close}}
      - name: whole
        request: {method: GET, url: "^/mock/whole$"}
        response: {status: 200, body: "all of it"}
`, up)
}

// abortCases are the cut answers: the path, the bytes of body before
// the cut, whether the cut is a reset on HTTP/1.1, and the length the
// headers promise.
var abortCases = []struct {
	path     string
	after    int
	reset    bool
	promised string
}{
	{"/mock/reset", 5, true, "20"},
	{"/mock/close", 5, false, "20"},
	{"/data", 1024, true, "4096"}, // forwarded: the upstream's 4 KiB
}

// h2Stream is what the client read of one HTTP/2 stream.
type h2Stream struct {
	status string
	length string
	body   []byte
	ended  bool // END_STREAM
	reset  http2.ErrCode
	resets bool
}

// h2Get sends a GET on stream id of fr and reads frames until that
// stream ends (END_STREAM or RST_STREAM).
func h2Get(t *testing.T, fr *http2.Framer, id uint32, path string) h2Stream {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "doppel"}, {":path", path}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	var s h2Stream
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("stream %d: %v after %+v", id, err, s)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame:
			t.Fatalf("stream %d: GOAWAY %v", id, f.ErrCode)
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				continue
			}
			s.status, s.length = f.PseudoValue("status"), ""
			for _, hf := range f.RegularFields() {
				if hf.Name == "content-length" {
					s.length = hf.Value
				}
			}
			if f.StreamEnded() {
				s.ended = true
				return s
			}
		case *http2.DataFrame:
			if f.StreamID != id {
				continue
			}
			s.body = append(s.body, f.Data()...)
			if f.StreamEnded() {
				s.ended = true
				return s
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				s.resets, s.reset = true, f.ErrCode
				return s
			}
		}
	}
}

// h2Conn opens an HTTP/2 connection on c: the preface and SETTINGS.
func h2Conn(t *testing.T, c net.Conn) *http2.Framer {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return fr
}

// h1Cut sends a GET on c and reads until the connection ends.
func h1Cut(t *testing.T, c net.Conn, path string) wire {
	t.Helper()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: doppel\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	var w wire
	w.got, w.end = io.ReadAll(c)
	if w.end == nil {
		w.end = io.EOF
	}
	return w
}

func TestAnAbortAtBodyIsOneBehaviourPerProtocol(t *testing.T) {
	t.Parallel()
	up, _ := faultUpstream(t)
	clear := serveConfig(t, t.TempDir(), 0, 0, abortProxies(up))
	_, clearAddr := serveUp(t, clear, nil)
	dir := t.TempDir()
	ca, leaf := certstest.PKI(t)
	certFile, keyFile := leaf.Files(t, dir)
	secure := tlsConfig(t, dir, fmt.Sprintf("{cert: %q, key: %q}", certFile, keyFile), abortProxies(up))
	_, tlsAddr := serveUp(t, secure, nil)
	dial := func(t *testing.T, overTLS bool, proto string) net.Conn {
		t.Helper()
		if !overTLS {
			c, err := net.Dial("tcp", clearAddr)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		c, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{proto}})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ConnectionState().NegotiatedProtocol; got != proto {
			t.Fatalf("ALPN chose %q, want %q", got, proto)
		}
		return c
	}

	for _, overTLS := range []bool{false, true} {
		name := map[bool]string{false: "h2c", true: "h2 over TLS"}[overTLS]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range abortCases {
				t.Run(tc.path, func(t *testing.T) {
					c := dial(t, overTLS, "h2")
					defer c.Close()
					fr := h2Conn(t, c)
					s := h2Get(t, fr, 1, tc.path)
					if s.status != "200" || s.length != tc.promised || len(s.body) != tc.after || s.ended ||
						!s.resets || s.reset != http2.ErrCodeInternal {
						t.Errorf("status %q, content-length %q, %d bytes, END_STREAM %v, RST_STREAM %v %v; want 200, %s, %d bytes, then RST_STREAM INTERNAL_ERROR",
							s.status, s.length, len(s.body), s.ended, s.resets, s.reset, tc.promised, tc.after)
					}
					// The connection goes on serving.
					if next := h2Get(t, fr, 3, "/mock/whole"); next.status != "200" || string(next.body) != "all of it" || !next.ended {
						t.Errorf("the next request on the connection: %+v", next)
					}
				})
			}
		})
	}

	for _, overTLS := range []bool{false, true} {
		name := map[bool]string{false: "HTTP/1.1", true: "HTTP/1.1 over TLS"}[overTLS]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range abortCases {
				t.Run(tc.path, func(t *testing.T) {
					w := h1Cut(t, dial(t, overTLS, "http/1.1"), tc.path)
					if !strings.HasPrefix(w.head(), "HTTP/1.1 200") || !strings.Contains(w.head(), "Content-Length: "+tc.promised) || len(w.body()) != tc.after {
						t.Errorf("head %q, %d bytes of body; want 200, Content-Length %s, %d bytes", w.head(), len(w.body()), tc.promised, tc.after)
					}
					if tc.reset && !errors.Is(w.end, syscall.ECONNRESET) || !tc.reset && w.end != io.EOF {
						t.Errorf("ended %v; want a reset %v", w.end, tc.reset)
					}
				})
			}
		})
	}
}
