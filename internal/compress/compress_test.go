package compress

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
)

var payload = strings.Repeat(`{"name": "zeta", "type": "http"} `, 200)

func serve(accept string, status int) *httptest.ResponseRecorder {
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Encoding") != "" {
			panic("the inner handler was asked to compress too")
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "999")
		w.WriteHeader(status)
		if status != http.StatusNoContent {
			_, _ = io.WriteString(w, payload)
		}
	}))
	req := httptest.NewRequest("GET", "/api/v1/proxies", nil)
	if accept != "" {
		req.Header.Set("Accept-Encoding", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestNegotiation(t *testing.T) {
	cases := map[string]string{
		"":                     "",
		"identity":             "",
		"gzip":                 "gzip",
		"gzip, deflate, br":    "br",
		"br;q=0, gzip":         "gzip",
		"BR":                   "br",
		"deflate":              "",
		"gzip;q=0.5, br;q=0.1": "br",
	}
	for accept, want := range cases {
		rec := serve(accept, 200)
		if got := rec.Header().Get("Content-Encoding"); got != want {
			t.Errorf("%q: Content-Encoding %q, want %q", accept, got, want)
		}
		if rec.Header().Get("Vary") != "Accept-Encoding" {
			t.Errorf("%q: no Vary", accept)
		}
		var r io.Reader = rec.Body
		switch want {
		case "br":
			r = brotli.NewReader(rec.Body)
		case "gzip":
			r, _ = gzip.NewReader(rec.Body)
		}
		body, _ := io.ReadAll(r)
		if string(body) != payload {
			t.Errorf("%q: the body does not decode to the payload", accept)
		}
		if want != "" && (rec.Header().Get("Content-Length") != "" || rec.Body.Len() >= len(payload)) {
			t.Errorf("%q: not compressed (%d bytes, Content-Length %q)", accept, rec.Body.Len(), rec.Header().Get("Content-Length"))
		}
	}
}

func TestNoBodyNoEncoding(t *testing.T) {
	rec := serve("br", http.StatusNoContent)
	if rec.Header().Get("Content-Encoding") != "" || !bytes.Equal(rec.Body.Bytes(), nil) {
		t.Fatal("a 204 was given an encoding")
	}
}
