package journal

import (
	"slices"
	"time"
	"unsafe"

	"github.com/doppelproxy/doppel/internal/telemetry"
)

// kept is an entry as the ring holds it: every string, header and body of
// the request in one byte slice, the rest numbers. Ten thousand of them
// are then twenty thousand objects with one pointer each for the garbage
// collector to mark on every cycle, instead of a dozen pointers and as
// many objects per entry; the Entry readers see is made from it on
// reading.
type kept struct {
	seq      uint64 // the order of recording, from 1
	pos      uint64 // the place in its ring's order (ringSlots.next)
	size     int64  // what it takes of journal.bytes
	unixNano int64
	status   int
	// duration, upstream and latency are those of the record.
	duration, upstream, latency time.Duration
	flags                       keptFlag
	tunnel                      *telemetry.Tunnel // an upgraded connection's; nil for the rest
	text                        []byte
	ends                        [nText]uint32 // where each text field ends
}

// The fields of kept.text, in their order.
const (
	textID = iota
	textProxy
	textMock
	textMethod
	textPath
	textQuery
	textClient
	textAbort
	textSession
	textHeaders
	textResponseHeaders
	textBody
	textResponseBody
	nText
)

type keptFlag uint16

const (
	flagMock keptFlag = 1 << iota
	flagUpstream
	flagLoss
	flagHang
	flagBandwidth
	flagBodyCut
	flagResponseBodyCut
	flagHeadersCut // the request's or the answer's
	flagCounterFleet
	flagCounterLocal
)

// keptOverhead is what an entry takes beside its text.
const keptOverhead = int64(unsafe.Sizeof(kept{}))

// keep copies what the record says of a finished request: the record and
// its headers belong to the request, the entry outlives it.
func keep(rec *telemetry.Exchange, start time.Time, s *settings) *kept {
	k := &kept{
		unixNano: start.UnixNano(),
		status:   rec.Status,
		duration: rec.Duration,
		upstream: rec.UpstreamDuration,
		latency:  rec.LatencyWaited,
	}
	if t := rec.Tunnel; t != nil {
		c := *t
		k.tunnel = &c
	}
	var body, responseBody []byte
	if c := rec.RequestBody; c != nil {
		body = c.Bytes
		k.flag(flagBodyCut, c.Cut)
	}
	if c := rec.ResponseBody; c != nil {
		responseBody = c.Bytes
		k.flag(flagResponseBodyCut, c.Cut)
	}
	k.flag(flagMock, rec.Mock != "")
	k.flag(flagUpstream, rec.UpstreamAnswered)
	k.flag(flagLoss, rec.Fired("loss"))
	k.flag(flagHang, rec.Fired("hang"))
	k.flag(flagBandwidth, rec.Fired("bandwidth"))
	k.flag(flagCounterFleet, rec.Counter == "fleet")
	k.flag(flagCounterLocal, rec.Counter == "local")

	strs := [...]string{rec.RequestID, rec.Proxy, rec.Mock, rec.Method, rec.Path, rec.Query, rec.Client, rec.Abort, rec.Session}
	reqHeaders := planFlat(rec.RequestHeader, s.secret, s.headers)
	respHeaders := planFlat(rec.ResponseHeader, s.responseSecret, s.headers)
	k.flag(flagHeadersCut, reqHeaders.cut || respHeaders.cut)
	size := reqHeaders.size + respHeaders.size + len(body) + len(responseBody)
	for _, v := range strs {
		size += len(v)
	}
	// Grown rather than made: its capacity is then the allocation's, size
	// rounded up, which is what journal.bytes counts.
	b := slices.Grow([]byte(nil), size)
	for i, v := range strs {
		b = append(b, v...)
		k.ends[i] = uint32(len(b))
	}
	b = reqHeaders.append(b, rec.RequestHeader, s.secret)
	k.ends[textHeaders] = uint32(len(b))
	b = respHeaders.append(b, rec.ResponseHeader, s.responseSecret)
	k.ends[textResponseHeaders] = uint32(len(b))
	b = append(b, body...)
	k.ends[textBody] = uint32(len(b))
	b = append(b, responseBody...)
	k.ends[textResponseBody] = uint32(len(b))
	k.text = b
	k.size = int64(cap(b)) + keptOverhead
	if k.tunnel != nil {
		k.size += int64(unsafe.Sizeof(*k.tunnel))
	}
	return k
}

func (k *kept) flag(f keptFlag, on bool) {
	if on {
		k.flags |= f
	}
}

func (k *kept) has(f keptFlag) bool { return k.flags&f != 0 }

// field is one text field, sharing the kept bytes (never written again).
func (k *kept) field(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = k.ends[i-1]
	}
	return k.text[start:k.ends[i]:k.ends[i]]
}

func (k *kept) str(i int) string { return string(k.field(i)) }

// proxy is the entry's proxy, without making the entry.
func (k *kept) proxy() string { return k.str(textProxy) }

// entry is what readers see of k.
func (k *kept) entry() *Entry {
	e := &Entry{
		ID:                    k.str(textID),
		Time:                  time.Unix(0, k.unixNano),
		Proxy:                 k.proxy(),
		Method:                k.str(textMethod),
		Path:                  k.str(textPath),
		Query:                 k.str(textQuery),
		Headers:               Headers(k.field(textHeaders)),
		Body:                  Body(k.field(textBody)),
		BodyTruncated:         k.has(flagBodyCut),
		Status:                Status(k.status),
		ResponseHeaders:       Headers(k.field(textResponseHeaders)),
		HeadersCut:            k.has(flagHeadersCut),
		ResponseBody:          Body(k.field(textResponseBody)),
		ResponseBodyTruncated: k.has(flagResponseBodyCut),
		DurationMS:            telemetry.Millis(k.duration),
		Client:                k.str(textClient),
		Fault: Fault{
			Replace:   k.has(flagMock),
			Loss:      k.has(flagLoss),
			Hang:      k.has(flagHang),
			Bandwidth: k.has(flagBandwidth),
			LatencyMS: telemetry.Millis(k.latency),
		},
		seq: k.seq,
		k:   k,
	}
	if k.has(flagMock) {
		m := k.str(textMock)
		e.Mock = &m
	}
	if id := k.field(textSession); len(id) > 0 {
		sid := string(id)
		e.Session = &sid
	}
	if at := k.field(textAbort); len(at) > 0 {
		a := string(at)
		e.Fault.Abort = &a
	}
	switch {
	case k.has(flagCounterFleet):
		e.Counter = "fleet"
	case k.has(flagCounterLocal):
		e.Counter = "local"
	}
	if k.has(flagUpstream) {
		ms := telemetry.Millis(k.upstream)
		e.UpstreamMS = &ms
	}
	if t := k.tunnel; t != nil {
		e.Tunnel = &Tunnel{BytesUp: t.Up, BytesDown: t.Down, DurationMS: telemetry.Millis(t.Duration)}
	}
	return e
}
