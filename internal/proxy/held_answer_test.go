package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/telemetry"
)

// TestTheHeldAnswerIsNetHTTPs: for each rule parkedAnswer copies from
// net/http (the status line of a known and an unknown code, the sorted
// header, Date, Content-Length, a sniffed Content-Type, no body for HEAD,
// 1xx, 204 and 304, Connection: close when the connection closes), its
// bytes are the ones net/http's own server writes for the same answer,
// but the Date.
func TestTheHeldAnswerIsNetHTTPs(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		code         int
		header       http.Header
		body         string
		closing      bool
	}{
		{name: "sniffed text", method: "GET", code: 200, body: "hello, world"},
		{name: "sniffed html", method: "GET", code: 200, body: "<html><body>x</body></html>"},
		{name: "typed json", method: "GET", code: 201, header: http.Header{"Content-Type": {"application/json"}, "X-B": {"2"}, "X-A": {"1", "3"}}, body: `{"ok":true}`},
		{name: "empty", method: "GET", code: 200},
		{name: "a length of its own", method: "GET", code: 200, header: http.Header{"Content-Length": {"5"}}, body: "12345"},
		{name: "head", method: "HEAD", code: 200, body: "not sent"},
		{name: "head typed", method: "HEAD", code: 200, header: http.Header{"Content-Type": {"text/plain"}}, body: "not sent"},
		{name: "no content", method: "GET", code: 204},
		{name: "not modified", method: "GET", code: 304, header: http.Header{"Etag": {`"v1"`}}},
		{name: "teapot", method: "GET", code: 418, body: "short and stout"},
		{name: "unknown code", method: "GET", code: 599, body: "?"},
		{name: "encoded, not sniffed", method: "GET", code: 200, header: http.Header{"Content-Encoding": {"gzip"}}, body: "\x1f\x8b\x08\x00"},
		{name: "closing", method: "GET", code: 200, body: "last", closing: true},
		{name: "closing, said already", method: "GET", code: 200, header: http.Header{"Connection": {"close"}}, body: "last", closing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header()[k] = v
				}
				w.Header().Set(headerRequestID, "same")
				w.WriteHeader(tc.code)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			want := rawAnswer(t, srv.Listener.Addr().String(), tc.method, tc.closing)

			ex := &exchange{req: httptest.NewRequest(tc.method, "/", nil), header: http.Header{}, held: []byte(tc.body)}
			for k, v := range tc.header {
				ex.header[k] = v
			}
			ex.rec = telemetry.Exchange{RequestID: "same", Status: tc.code}
			got := ex.parkedAnswer(tc.closing)
			if w, g := undated(want), undated(got); !bytes.Equal(w, g) {
				t.Errorf("net/http wrote\n%q\nthe held answer is\n%q", w, g)
			}
		})
	}
}

// rawAnswer is what a server at addr writes for one request, as bytes:
// the head, then the body its framing says.
func rawAnswer(t *testing.T, addr, method string, closing bool) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	req := method + " / HTTP/1.1\r\nHost: d\r\n"
	if closing {
		req += "Connection: close\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	br := bufio.NewReader(io.TeeReader(c, &raw))
	res, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		t.Fatal(err)
	}
	// What was read past the answer is not the answer's.
	return raw.Bytes()[:raw.Len()-br.Buffered()]
}

var dateLine = regexp.MustCompile(`(?m)^Date: [^\r]*\r\n`)

func undated(b []byte) []byte { return dateLine.ReplaceAll(b, nil) }
