package proxy

import (
	"bytes"
	"net/http"
	"strconv"
	"time"
)

// The held answer's bytes (hold.go has the whole idea): what net/http
// would have written for it, rule by rule, pinned against net/http's own
// output by TestAParkedAnswerIsTheSameAnswer (cmd/doppel).

// headerSaysClose reports whether the answer's Connection header closes
// the connection after it.
func headerSaysClose(h http.Header) bool { return hasToken(h["Connection"], "close") }

// parkedAnswer is the held answer as net/http would have written it: the
// status line, the handler's header (with the request id and receipt,
// which go into it as for any answer), then what the server adds (Date,
// Content-Length, a sniffed Content-Type, Connection: close), then the
// body.
func (ex *exchange) parkedAnswer(closing bool) []byte {
	code := ex.rec.Status
	hdr := ex.header
	hdr.Set(headerRequestID, ex.rec.RequestID)
	if ex.wantsReceipt() {
		hdr.Set(headerReceipt, receipt(&ex.rec))
	}
	// What the handler wrote frames and types the answer, as net/http
	// does, even to a HEAD, which is sent none of it.
	written, head := ex.held, ex.req.Method == http.MethodHead
	body := written
	if head || !bodyAllowedForStatus(code) {
		body = nil
	}
	var b bytes.Buffer
	b.Grow(256 + len(body))
	b.WriteString("HTTP/1.1 ")
	b.WriteString(strconv.Itoa(code))
	b.WriteByte(' ')
	if text := http.StatusText(code); text != "" {
		b.WriteString(text)
	} else {
		b.WriteString("status code ")
		b.WriteString(strconv.Itoa(code))
	}
	b.WriteString("\r\n")
	_ = hdr.Write(&b)
	if _, ok := hdr["Date"]; !ok {
		b.WriteString("Date: ")
		b.WriteString(time.Now().UTC().Format(http.TimeFormat))
		b.WriteString("\r\n")
	}
	if bodyAllowedForStatus(code) {
		if _, ok := hdr["Content-Length"]; !ok && (!head || len(written) > 0) {
			b.WriteString("Content-Length: ")
			b.WriteString(strconv.Itoa(len(written)))
			b.WriteString("\r\n")
		}
		if _, ok := hdr["Content-Type"]; !ok && len(written) > 0 && hdr.Get("Content-Encoding") == "" {
			b.WriteString("Content-Type: ")
			b.WriteString(http.DetectContentType(written))
			b.WriteString("\r\n")
		}
	}
	if closing && !headerSaysClose(hdr) {
		b.WriteString("Connection: close\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// bodyAllowedForStatus is net/http's rule: 1xx, 204 and 304 carry none.
func bodyAllowedForStatus(code int) bool {
	switch {
	case code >= 100 && code <= 199, code == http.StatusNoContent, code == http.StatusNotModified:
		return false
	}
	return true
}
