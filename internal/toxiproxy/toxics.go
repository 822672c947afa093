package toxiproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/internal/tcp"
)

// A toxic as Toxiproxy's API writes it: its attributes are its type's.
type toxic struct {
	Name       string     `json:"name"`
	Type       string     `json:"type"`
	Stream     string     `json:"stream"`
	Toxicity   float32    `json:"toxicity"`
	Attributes attributes `json:"attributes"`
}

// attributes are one toxic type's settings, in Toxiproxy's units, and
// what they are on Doppel's relay: nil for a toxic that does nothing
// there (noop).
type attributes interface {
	check() error
	relay() tcp.Toxic
}

// toxicTypes are the toxics Toxiproxy 2.x has, each a fresh value of its
// attributes (Toxiproxy's defaults are the zero values).
var toxicTypes = map[string]func() attributes{
	"latency":    func() attributes { return &latency{} },
	"bandwidth":  func() attributes { return &bandwidth{} },
	"timeout":    func() attributes { return &timeout{} },
	"reset_peer": func() attributes { return &resetPeer{} },
	"limit_data": func() attributes { return &limitData{} },
	"slicer":     func() attributes { return &slicer{} },
	"slow_close": func() attributes { return &slowClose{} },
	"noop":       func() attributes { return &noop{} },
}

// maxMillis bounds a time a toxic is given: a day, far past any test, and
// far from overflowing a time.Duration.
const maxMillis = 24 * 60 * 60 * 1000

func checkMillis(key string, v int64) error {
	if v < 0 || v > maxMillis {
		return fmt.Errorf("%s is %d: milliseconds from 0 to %d", key, v, maxMillis)
	}
	return nil
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// latency: every chunk waits latency ± jitter milliseconds.
type latency struct {
	Latency int64 `json:"latency"`
	Jitter  int64 `json:"jitter"`
}

func (a *latency) check() error {
	if err := checkMillis("latency", a.Latency); err != nil {
		return err
	}
	return checkMillis("jitter", a.Jitter)
}

func (a *latency) relay() tcp.Toxic { return tcp.Latency{Base: ms(a.Latency), Spread: ms(a.Jitter)} }

// bandwidth: rate KB/s (1,000 bytes); 0 is no limit, as in Toxiproxy.
type bandwidth struct {
	Rate int64 `json:"rate"`
}

func (a *bandwidth) check() error {
	if a.Rate < 0 || a.Rate > math.MaxInt64/1000 {
		return fmt.Errorf("rate is %d: KB/s, 0 or more", a.Rate)
	}
	return nil
}

func (a *bandwidth) relay() tcp.Toxic {
	if a.Rate == 0 {
		return tcp.Latency{} // passes everything at once
	}
	return tcp.Bandwidth{BytesPerSecond: a.Rate * 1000}
}

// timeout: nothing passes; closed after timeout ms, or held with 0.
type timeout struct {
	Timeout int64 `json:"timeout"`
}

func (a *timeout) check() error     { return checkMillis("timeout", a.Timeout) }
func (a *timeout) relay() tcp.Toxic { return tcp.Timeout{After: ms(a.Timeout)} }

// reset_peer: a TCP RST timeout ms after the first bytes.
type resetPeer struct {
	Timeout int64 `json:"timeout"`
}

func (a *resetPeer) check() error { return checkMillis("timeout", a.Timeout) }
func (a *resetPeer) relay() tcp.Toxic {
	return tcp.ResetPeer{After: ms(a.Timeout), OnData: true}
}

// limit_data: the connection is closed once bytes have passed.
type limitData struct {
	Bytes int64 `json:"bytes"`
}

func (a *limitData) check() error {
	if a.Bytes < 0 {
		return fmt.Errorf("bytes is %d: 0 or more", a.Bytes)
	}
	return nil
}

func (a *limitData) relay() tcp.Toxic { return tcp.LimitData{Bytes: a.Bytes, Close: true} }

// slicer: slices of average_size ± size_variation bytes, delay µs apart.
type slicer struct {
	AverageSize   int `json:"average_size"`
	SizeVariation int `json:"size_variation"`
	Delay         int `json:"delay"`
}

func (a *slicer) check() error {
	switch {
	case a.AverageSize < 0 || a.AverageSize > 1<<30:
		return fmt.Errorf("average_size is %d: bytes, 0 or more", a.AverageSize)
	case a.SizeVariation < 0 || a.SizeVariation > 1<<30:
		return fmt.Errorf("size_variation is %d: bytes, 0 or more", a.SizeVariation)
	case a.Delay < 0 || int64(a.Delay) > maxMillis*1000:
		return fmt.Errorf("delay is %d: microseconds from 0 to %d", a.Delay, int64(maxMillis)*1000)
	}
	return nil
}

func (a *slicer) relay() tcp.Toxic {
	return tcp.Slicer{AverageSize: a.AverageSize, SizeVariation: a.SizeVariation, Delay: time.Duration(a.Delay) * time.Microsecond}
}

// slow_close: the close is passed on delay ms late.
type slowClose struct {
	Delay int64 `json:"delay"`
}

func (a *slowClose) check() error     { return checkMillis("delay", a.Delay) }
func (a *slowClose) relay() tcp.Toxic { return tcp.SlowClose{Delay: ms(a.Delay)} }

// noop does nothing, as Toxiproxy's: it is listed, changed and removed
// like any toxic, and has no attributes (any given are ignored, as
// Toxiproxy ignores them) and no part in the relay.
type noop struct{}

func (*noop) check() error     { return nil }
func (*noop) relay() tcp.Toxic { return nil }

// decodeToxic reads a new toxic as Toxiproxy does: stream downstream and
// toxicity 1 unless given, the name <type>_<stream> unless given, then the
// attributes of its type. The checks come in Toxiproxy's order, so that
// a body with two faults is refused for the same one; exists says whether
// the proxy has a toxic of that name.
func decodeToxic(body []byte, exists func(name string) bool) (*toxic, *apiError) {
	var head struct {
		Name     string          `json:"name"`
		Type     string          `json:"type"`
		Stream   string          `json:"stream"`
		Toxicity *float32        `json:"toxicity"`
		Attrs    json.RawMessage `json:"attributes"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, badBody(err)
	}
	t := &toxic{Name: head.Name, Type: head.Type, Stream: strings.ToLower(head.Stream), Toxicity: 1}
	if t.Stream == "" {
		t.Stream = "downstream"
	}
	if t.Stream != "upstream" && t.Stream != "downstream" {
		return nil, errInvalidStream
	}
	if t.Name == "" {
		t.Name = t.Type + "_" + t.Stream
	}
	mk, ok := toxicTypes[t.Type]
	if !ok {
		return nil, errInvalidToxicType
	}
	if e := checkName("name", t.Name); e != nil {
		return nil, e
	}
	if exists != nil && exists(t.Name) {
		return nil, errToxicExists
	}
	if head.Toxicity != nil {
		t.Toxicity = *head.Toxicity
	}
	t.Attributes = mk()
	if err := decodeAttributes(head.Attrs, t.Attributes); err != nil {
		return nil, err
	}
	if err := checkToxic(t); err != nil {
		return nil, err
	}
	return t, nil
}

// decodeUpdate applies an update's body to a copy of t: the attributes
// given replace theirs, the rest stay, and so does the toxicity unless
// given.
func decodeUpdate(t *toxic, body []byte) (*toxic, *apiError) {
	var head struct {
		Toxicity *float32        `json:"toxicity"`
		Attrs    json.RawMessage `json:"attributes"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, badBody(err)
	}
	next := *t
	next.Attributes = toxicTypes[t.Type]()
	// A copy of the attributes, then the update decoded onto it.
	old, _ := json.Marshal(t.Attributes)
	_ = json.Unmarshal(old, next.Attributes)
	if err := decodeAttributes(head.Attrs, next.Attributes); err != nil {
		return nil, err
	}
	if head.Toxicity != nil {
		next.Toxicity = *head.Toxicity
	}
	if err := checkToxic(&next); err != nil {
		return nil, err
	}
	return &next, nil
}

func decodeAttributes(raw json.RawMessage, into attributes) *apiError {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return badBody(err)
	}
	return nil
}

// checkToxic refuses what Toxiproxy would take and then misbehave on: a
// negative time, a toxicity outside 0 to 1.
func checkToxic(t *toxic) *apiError {
	if t.Toxicity < 0 || t.Toxicity > 1 {
		return badBody(fmt.Errorf("toxicity is %v: from 0 to 1", t.Toxicity))
	}
	if err := t.Attributes.check(); err != nil {
		return badBody(fmt.Errorf("attributes: %w", err))
	}
	return nil
}

// entry is the toxic on Doppel's relay; false for one that has no part
// in it.
func (t *toxic) entry() (tcp.Entry, bool) {
	r := t.Attributes.relay()
	return tcp.Entry{Toxic: r, Toxicity: float64(t.Toxicity), Name: t.Name}, r != nil
}
