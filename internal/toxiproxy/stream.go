package toxiproxy

import (
	"bytes"
	"encoding/json"
	"io"
)

// streamWriter writes a JSON answer piece by piece: each value is
// encoded into one buffer, reused, and written at once, so that an
// answer listing every proxy holds one proxy's encoding at a time. After
// a write fails (the client went away) the rest is skipped.
type streamWriter struct {
	w   io.Writer
	buf bytes.Buffer
	enc *json.Encoder
	err error
}

func newStreamWriter(w io.Writer) *streamWriter {
	sw := &streamWriter{w: w}
	sw.enc = json.NewEncoder(&sw.buf)
	return sw
}

func (sw *streamWriter) raw(s string) {
	if sw.err == nil {
		_, sw.err = io.WriteString(sw.w, s)
	}
}

// value writes v's JSON; the values written here (names, proxies and
// their toxics) always encode.
func (sw *streamWriter) value(v any) {
	if sw.err != nil {
		return
	}
	sw.buf.Reset()
	if sw.err = sw.enc.Encode(v); sw.err != nil {
		return
	}
	// Encode ends the value with a newline, which the answer has only
	// at its end.
	_, sw.err = sw.w.Write(bytes.TrimSuffix(sw.buf.Bytes(), []byte("\n")))
}
