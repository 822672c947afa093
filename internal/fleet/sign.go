package fleet

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A replica asks its peers for their journals without the caller's token
// (SPEC §18.1): whoever can write the registry names where those calls
// go, and must not collect tokens. Each call carries the caller's
// identity, the token's name, and is signed with HMAC-SHA256 by the fleet
// key every replica is given and the database never holds; the peer
// checks it, uses it once, and applies that name's access from its own
// configuration.

// The headers of a signed call.
const (
	HeaderTarget    = "X-Doppel-Fleet-Target" // the id of the replica asked
	HeaderTime      = "X-Doppel-Fleet-Time"   // Unix seconds
	HeaderNonce     = "X-Doppel-Fleet-Nonce"  // 32 hex digits
	HeaderCaller    = "X-Doppel-Fleet-Caller" // the token's name; "" for an anonymous caller
	HeaderSignature = "X-Doppel-Fleet-Signature"
)

// Skew is how far a signed call's time may be from the peer's clock.
const Skew = 30 * time.Second

// Key is the fleet key: DOPPEL_FLEET_KEY, or the file --fleet-key-file names.
type Key []byte

// Key lengths: long enough to resist guessing, short enough to be a key.
const (
	minKey = 32
	maxKey = 4096
)

// ParseKey reads a fleet key, its surrounding space trimmed.
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	switch {
	case len(s) < minKey:
		return nil, fmt.Errorf("a fleet key is at least %d characters, this one is %d (make one with `openssl rand -hex 32`)", minKey, len(s))
	case len(s) > maxKey:
		return nil, fmt.Errorf("a fleet key is at most %d characters, this one is %d", maxKey, len(s))
	}
	return Key(s), nil
}

// Sign signs req, a call to the replica target whose body is body, on
// behalf of the caller named (empty: anonymous), at now.
func (k Key) Sign(req *http.Request, body []byte, target, caller string, now time.Time) {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	h := req.Header
	h.Set(HeaderTarget, target)
	h.Set(HeaderTime, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderNonce, hex.EncodeToString(nonce[:]))
	h.Set(HeaderCaller, caller)
	h.Set(HeaderSignature, k.mac(req.Method, req.URL.RequestURI(), body, h.Get(HeaderTarget), h.Get(HeaderTime), h.Get(HeaderNonce), caller))
}

// mac is the signature of a call: its method, path and query, the digest
// of its body, its target, time, nonce and caller, each on a line of its
// own.
func (k Key) mac(method, uri string, body []byte, target, at, nonce, caller string) string {
	m := hmac.New(sha256.New, k)
	digest := sha256.Sum256(body)
	for _, part := range []string{method, uri, hex.EncodeToString(digest[:]), target, at, nonce, caller} {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// Signed reports whether r claims to be a signed call of a peer.
func Signed(r *http.Request) bool { return r.Header.Get(HeaderSignature) != "" }

// Verifier checks the signed calls addressed to one replica, each once.
type Verifier struct {
	key  Key
	self string
	mu   sync.Mutex
	seen map[string]time.Time // signature -> when it stops being within Skew
}

// maxSeen bounds the signatures remembered: past it, a call is refused
// until older ones expire (a flood of valid calls needs the key).
const maxSeen = 100_000

// NewVerifier checks calls to the replica self signed with key.
func NewVerifier(key Key, self string) *Verifier {
	return &Verifier{key: key, self: self, seen: map[string]time.Time{}}
}

// ErrNotSigned is a call whose signature does not hold.
var ErrNotSigned = errors.New("not a call of this fleet")

// Verify checks r, whose body is body, at now and returns the caller it
// names. It fails for a call signed with another key, for another
// replica, with another body, outside Skew of now, or seen before.
func (v *Verifier) Verify(r *http.Request, body []byte, now time.Time) (caller string, err error) {
	if v == nil || len(v.key) == 0 {
		return "", fmt.Errorf("%w: this replica has no fleet key", ErrNotSigned)
	}
	h := r.Header
	target, at, nonce, sig := h.Get(HeaderTarget), h.Get(HeaderTime), h.Get(HeaderNonce), h.Get(HeaderSignature)
	caller = h.Get(HeaderCaller)
	if len(sig) != sha256.Size*2 || len(nonce) != 32 || len(caller) > 256 || len(target) > 64 || len(at) > 20 {
		return "", fmt.Errorf("%w: malformed signature headers", ErrNotSigned)
	}
	want := v.key.mac(r.Method, r.URL.RequestURI(), body, target, at, nonce, caller)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return "", fmt.Errorf("%w: the signature does not match (another fleet key?)", ErrNotSigned)
	}
	if target != v.self {
		return "", fmt.Errorf("%w: signed for replica %s, not this one", ErrNotSigned, target)
	}
	unix, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: malformed time", ErrNotSigned)
	}
	signed := time.Unix(unix, 0)
	if d := now.Sub(signed); d > Skew || d < -Skew {
		return "", fmt.Errorf("%w: signed at %s, more than %s from this replica's clock", ErrNotSigned, signed.UTC().Format(time.RFC3339), Skew)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for s, until := range v.seen {
		if len(v.seen) < maxSeen/2 {
			break
		}
		if now.After(until) {
			delete(v.seen, s)
		}
	}
	if _, again := v.seen[sig]; again {
		return "", fmt.Errorf("%w: this signature was used already", ErrNotSigned)
	}
	if len(v.seen) >= maxSeen {
		return "", fmt.Errorf("%w: too many signed calls at once", ErrNotSigned)
	}
	v.seen[sig] = signed.Add(Skew)
	return caller, nil
}
