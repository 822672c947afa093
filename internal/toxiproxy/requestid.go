package toxiproxy

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"os"
	"sync/atomic"
	"time"
)

// requestIDHeader is on every answer of a route, as Toxiproxy's request
// logger sets it; an unknown path or method has none there either.
const requestIDHeader = "X-Toxiproxy-Request-Id"

// requestIDs makes ids of the shape Toxiproxy's are (an xid, what its
// logger's request ids are): 12 bytes, written as 20 characters of
// 0-9 and a-v, that sort by the time they were made. They are the
// seconds since 1970 (4 bytes, big-endian), 3 bytes of the machine,
// the process id (2 bytes) and a counter (3 bytes) that starts at a
// random value. The machine's bytes are random here, drawn once per
// server: xid hashes a machine id, which is no one's business to read.
type requestIDs struct {
	machine [3]byte
	pid     uint16
	counter atomic.Uint32
}

// xidEncoding is base32hex in lower case, unpadded: 12 bytes are 20
// characters.
var xidEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

func newRequestIDs() *requestIDs {
	var seed [6]byte
	_, _ = rand.Read(seed[:]) // never fails: it panics instead
	ids := &requestIDs{pid: uint16(os.Getpid())}
	copy(ids.machine[:], seed[:3])
	ids.counter.Store(uint32(seed[3])<<16 | uint32(seed[4])<<8 | uint32(seed[5]))
	return ids
}

// next is a new id made at now.
func (ids *requestIDs) next(now time.Time) string {
	var id [12]byte
	binary.BigEndian.PutUint32(id[0:4], uint32(now.Unix()))
	copy(id[4:7], ids.machine[:])
	binary.BigEndian.PutUint16(id[7:9], ids.pid)
	n := ids.counter.Add(1)
	id[9], id[10], id[11] = byte(n>>16), byte(n>>8), byte(n)
	return xidEncoding.EncodeToString(id[:])
}
