package tcp

import (
	"io"
	"testing"
	"time"
)

// A record counts the bytes read each way apart from those relayed: a
// toxic that drops them (timeout) has them read, not relayed.
func TestARecordCountsWhatWasReadBeforeTheToxics(t *testing.T) {
	p, addr, records := start(t, echo(t, []byte("hi")), &Toxics{Up: []Entry{{Toxic: Timeout{}, Toxicity: 1}}})
	c := dial(t, addr)
	greeting := make([]byte, 2)
	if _, err := io.ReadFull(c, greeting); err != nil || string(greeting) != "hi" {
		t.Fatalf("the greeting: %q, %v", greeting, err)
	}
	if _, err := c.Write([]byte("dropped")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // for the relay to read them
	_ = p.Close()
	recs := records()
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	r := recs[0]
	if r.ReadUp != 7 || r.Up != 0 || r.ReadDown != 2 || r.Down != 2 {
		t.Errorf("read %d up, %d down; relayed %d up, %d down; want 7 and 2 read, 0 and 2 relayed", r.ReadUp, r.ReadDown, r.Up, r.Down)
	}
}
