package admin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/fleet"
)

var fuzzKey = fleet.Key(strings.Repeat("k", 32))

// framed is body as a peer sends it to the call req: frames of at most
// size bytes, each signed.
func framed(req *http.Request, body []byte, size int) []byte {
	rec := httptest.NewRecorder()
	a := newFramedAnswer(rec, req, fuzzKey)
	for len(body) > 0 {
		n := min(len(body), size)
		_, _ = a.Write(body[:n])
		body = body[n:]
	}
	return rec.Body.Bytes()
}

// signedCall is a call to a peer's stream, signed.
func signedCall() *http.Request {
	req := httptest.NewRequest("GET", "http://peer/api/v1/requests/stream", nil)
	fuzzKey.Sign(req, nil, "peer", "http://peer", fleet.Identity{}, time.Now())
	return req
}

// TestPeerStreamFramesHold: the events of a peer's stream are read back
// whatever the frames cut them into; a frame changed, dropped, repeated,
// or signed for another call is refused.
func TestPeerStreamFramesHold(t *testing.T) {
	req := signedCall()
	events := "event: request\nid: 7\ndata: {\"id\":\"a\"}\n\n: a comment\n\nevent: position\ndata: {\"seq\":7,\"resumed\":true}\n\n"
	for _, size := range []int{1, 3, 10, len(events)} {
		ps := newPeerStream(bytes.NewReader(framed(req, []byte(events), size)), fuzzKey, req, 200)
		var got []string
		for {
			ev, err := ps.next()
			if err != nil {
				if err != io.EOF {
					t.Fatalf("frames of %d bytes: %v", size, err)
				}
				break
			}
			got = append(got, fmt.Sprintf("%s %s %s", ev.name, ev.id, ev.data))
		}
		if want := []string{`request 7 {"id":"a"}`, `position  {"seq":7,"resumed":true}`}; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("frames of %d bytes: %q", size, got)
		}
	}
	good := framed(req, []byte(events), 10)
	firstEnd := bytes.IndexByte(good, '\n') + 1 + 10
	changed := bytes.Clone(good)
	changed[firstEnd-1] ^= 1
	for name, body := range map[string][]byte{
		"a byte changed":        changed,
		"the first dropped":     good[firstEnd:],
		"the first repeated":    append(append([]byte{}, good[:firstEnd]...), good...),
		"not frames":            []byte("event: request\ndata: {}\n\n"),
		"another call's frames": framed(signedCall(), []byte(events), 10),
	} {
		ps := newPeerStream(bytes.NewReader(body), fuzzKey, req, 200)
		var err error
		for err == nil {
			_, err = ps.next()
		}
		if !errors.Is(err, fleet.ErrAnswerNotSigned) && !errors.Is(err, errNotFrames) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestCursorsRoundTrip: what a fleet stream writes as an event's id is
// what it reads back from Last-Event-ID; what is not one is refused.
func TestCursorsRoundTrip(t *testing.T) {
	c := &cursor{at: map[string]uint64{}}
	c.set("bbbb", 4)
	c.set("aaaa", 9)
	c.set("bbbb", 2) // never back
	id := string(c.appendID(nil, "aaaa", time.UnixMilli(1700000000123)))
	if id != "aaaa:9,bbbb:4,@1700000000123" {
		t.Fatalf("the id %q", id)
	}
	back, ok := parseCursor(id)
	if !ok || back.at["aaaa"] != 9 || back.at["bbbb"] != 4 || back.floor.UnixMilli() != 1700000000123 {
		t.Fatalf("read back: %+v %v", back, ok)
	}
	for _, bad := range []string{"", "7", "aaaa:9", "@1", "aaaa:9,aaaa:3,@1", "aa,aa:1,@1", "a a:1,@1", "aaaa:-1,@1", "aaaa:1,@1,@2", "aaaa:1,@x",
		strings.Repeat("a:1,", maxCursorParts) + "@1"} {
		if _, ok := parseCursor(bad); ok {
			t.Fatalf("%q was taken for a cursor", bad)
		}
	}
}

// FuzzPeerStream: whatever a peer sends, signed or not, reading it ends
// in an error or EOF, never holds more than its bounds, and never panics.
func FuzzPeerStream(f *testing.F) {
	req := signedCall()
	f.Add([]byte("event: request\nid: 1\ndata: {}\n\n"), false)
	f.Add([]byte("event: position\ndata: {\"seq\":1}\n\n"), true)
	f.Add([]byte("4 0000\nabcd"), false)
	f.Fuzz(func(t *testing.T, body []byte, sign bool) {
		if sign {
			body = framed(req, body, 7)
		}
		ps := newPeerStream(bytes.NewReader(body), fuzzKey, req, 200)
		for range 1000 {
			if _, err := ps.next(); err != nil {
				break
			}
			if len(ps.pending) > maxPeerEvent+maxFrame {
				t.Fatalf("%d bytes pending", len(ps.pending))
			}
		}
		_, _ = parseCursor(string(body))
	})
}
