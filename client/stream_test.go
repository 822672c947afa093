package client_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/client"
	"github.com/doppelproxy/doppel/doppeltest"
)

// TestStreamsOverTheBound: a caller's 17th stream is ErrTooManySubscribers.
func TestStreamsOverTheBound(t *testing.T) {
	s := doppeltest.New(t, doppeltest.Config{})
	ctx := ctxFor(t)
	for i := range 16 {
		st, err := s.Client.StreamRequests(ctx, client.Filter{})
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		defer st.Close()
	}
	_, err := s.Client.StreamRequests(ctx, client.Filter{})
	var e *client.Error
	if !errors.Is(err, client.ErrTooManySubscribers) || !errors.As(err, &e) || e.Status != 429 || !strings.Contains(e.Message, "16 streams") {
		t.Errorf("the 17th stream: %v", err)
	}
}

// TestAStreamThatFellBehindCountsWhatItLost: a stream read only after
// more entries than it may leave unread were recorded yields the newest
// 1,000, and Dropped counts the rest.
func TestAStreamThatFellBehindCountsWhatItLost(t *testing.T) {
	s := doppeltest.New(t, doppeltest.Config{YAML: `
proxies:
- name: shop
  type: http
  url: http://127.0.0.1:9/
  mocks:
  - {name: take, request: {method: POST, url: ^/take$}, response: {status: 200, body: taken}}
`})
	// A small receive buffer: the stream's client holds little unread.
	small := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
			return err
		}
		return serr
	}}).DialContext}}
	c := client.New(s.AdminURL, client.WithToken(s.Token), client.WithHTTPClient(small))
	ctx := ctxFor(t)
	stream, err := c.StreamRequests(ctx, client.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	const n = 3000
	body := strings.Repeat("b", 4096)
	proxy := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil}}
	for i := range n {
		req, _ := http.NewRequest("POST", s.ProxyURL+"/take", strings.NewReader(body))
		req.Header.Set("X-Request-ID", fmt.Sprint("r-", i))
		r, err := proxy.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	got := 0
	for {
		r, err := stream.Next()
		if err != nil {
			t.Fatalf("after %d entries: %v", got, err)
		}
		got++
		if r.ID == fmt.Sprint("r-", n-1) {
			break
		}
	}
	if stream.Dropped() == 0 || uint64(got)+stream.Dropped() != n {
		t.Errorf("%d entries read and %d dropped, of %d", got, stream.Dropped(), n)
	}
}
