// Package compress compresses the admin listener's answers for clients
// that ask: brotli preferred, else gzip. The proxy listener never
// compresses (it relays the upstream's encoding byte for byte), so this
// wraps the admin handler only.
package compress

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
)

// Handler compresses h's answers according to Accept-Encoding.
func Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		enc := negotiate(r.Header.Values("Accept-Encoding"))
		w.Header().Add("Vary", "Accept-Encoding")
		// Compression is decided here only: the inner handler must not
		// compress on its own as well.
		if r.Header.Get("Accept-Encoding") != "" {
			r = r.Clone(r.Context())
			r.Header.Del("Accept-Encoding")
		}
		if enc == "" || r.Method == http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		cw := &writer{ResponseWriter: w, enc: enc}
		defer cw.close()
		h.ServeHTTP(cw, r)
	})
}

// negotiate picks br, then gzip, among what the client accepts (q > 0).
func negotiate(values []string) string {
	accepted := map[string]bool{}
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			q := 1.0
			if k, v, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.TrimSpace(k) == "q" {
				q, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
			accepted[strings.ToLower(strings.TrimSpace(name))] = q > 0
		}
	}
	switch {
	case accepted["br"]:
		return "br"
	case accepted["gzip"]:
		return "gzip"
	}
	return ""
}

var (
	brPool   = sync.Pool{New: func() any { return brotli.NewWriterLevel(io.Discard, 5) }}
	gzipPool = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(io.Discard, gzip.DefaultCompression); return w }}
)

type writer struct {
	http.ResponseWriter
	enc     string
	started bool
	out     io.WriteCloser // nil when the answer is not compressed
}

func (w *writer) WriteHeader(status int) {
	if w.started {
		return
	}
	w.started = true
	h := w.Header()
	// A stream of events is flushed event by event: compressing would hold
	// them back.
	if status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified && h.Get("Content-Encoding") == "" &&
		!strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		h.Set("Content-Encoding", w.enc)
		h.Del("Content-Length")
		switch w.enc {
		case "br":
			bw := brPool.Get().(*brotli.Writer)
			bw.Reset(w.ResponseWriter)
			w.out = bw
		case "gzip":
			gw := gzipPool.Get().(*gzip.Writer)
			gw.Reset(w.ResponseWriter)
			w.out = gw
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *writer) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if w.out == nil {
		return w.ResponseWriter.Write(b)
	}
	return w.out.Write(b)
}

func (w *writer) close() {
	if w.out == nil {
		return
	}
	_ = w.out.Close()
	switch o := w.out.(type) {
	case *brotli.Writer:
		brPool.Put(o)
	case *gzip.Writer:
		gzipPool.Put(o)
	}
}

func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
