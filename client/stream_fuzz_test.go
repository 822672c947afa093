package client

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzStreamEvents: whatever the stream's body holds, Next returns
// entries or an error, reaches the body's end (io.EOF) or a line over the
// bound, and never panics; TestStreamEventsAreRead reads Doppel's events
// back.
func FuzzStreamEvents(f *testing.F) {
	f.Add([]byte(": the journal's entries follow\n\nevent: request\nid: 1\ndata: {\"id\":\"a\",\"status\":200}\n\n"))
	f.Add([]byte("event: dropped\ndata: {\"dropped\":3}\n\nevent: request\ndata: {\"id\":\"b\"}\n\n"))
	f.Add([]byte("event: request\ndata: {\"id\":\n\n"))
	f.Add([]byte("data: x\ndata: y\n\n: keep-alive\n\n"))
	f.Add([]byte("event: request\ndata: {\"body\": {\"base64\": \"!!\"}}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		lines := bufio.NewScanner(bytes.NewReader(body))
		lines.Buffer(make([]byte, 0, 1024), 1<<16)
		s := &RequestStream{body: io.NopCloser(bytes.NewReader(nil)), lines: lines}
		for range len(body) + 2 {
			_, err := s.Next()
			if errors.Is(err, io.EOF) || lines.Err() != nil {
				return // the end, or a line over the bound: the stream is over
			}
		}
		t.Fatalf("Next did not reach the end of %d bytes", len(body))
	})
}

func TestStreamEventsAreRead(t *testing.T) {
	body := ": hello\n\nevent: dropped\ndata: {\"dropped\":3}\n\nevent: request\nid: 7\ndata: {\"id\":\"a\",\"status\":201,\"body\":{\"base64\":\"/wA=\"}}\n\n"
	s := &RequestStream{body: io.NopCloser(nil), lines: bufio.NewScanner(bytes.NewReader([]byte(body)))}
	r, err := s.Next()
	if err != nil || r.ID != "a" || r.Status != 201 || string(r.Body) != "\xff\x00" || s.Dropped() != 3 {
		t.Fatalf("%+v %v dropped %d", r, err, s.Dropped())
	}
	if _, err := s.Next(); err != io.EOF {
		t.Errorf("the end: %v", err)
	}
}
