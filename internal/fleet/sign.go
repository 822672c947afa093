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
// identity (the token's name, its group, and a proof keyed by the fleet
// key that the caller holds that token) and is signed with HMAC-SHA256 by
// the fleet key every replica is given and the database never holds,
// over the call and the replica it is for, id and advertised URL, so that
// a row pointing elsewhere cannot relay it. The peer checks it, uses it
// once, applies that token's rights from its own configuration, and signs
// its answer, which the replica asked checks before using any of it.

// The headers of a signed call and of its answer.
const (
	HeaderTarget    = "X-Doppel-Fleet-Target"     // the id of the replica asked
	HeaderTargetURL = "X-Doppel-Fleet-Target-Url" // its advertised URL, as the registry says it
	HeaderTime      = "X-Doppel-Fleet-Time"       // Unix seconds
	HeaderNonce     = "X-Doppel-Fleet-Nonce"      // 32 hex digits
	HeaderCaller    = "X-Doppel-Fleet-Caller"     // the token's name; "" for an anonymous caller
	HeaderGroup     = "X-Doppel-Fleet-Group"      // the token's group
	HeaderProof     = "X-Doppel-Fleet-Proof"      // Key.Proof of the token's value
	HeaderSignature = "X-Doppel-Fleet-Signature"
	HeaderAnswer    = "X-Doppel-Fleet-Answer" // the answer's signature
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

// Identity is who a call is made for: a token's name and group and the
// proof that the caller presented its value; the zero Identity is an
// anonymous caller.
type Identity struct {
	Name, Group, Proof string
}

// Proof is what a call carries of a token's value: its HMAC by the fleet
// key, which a peer compares with its own token's so that a token of the
// same name and another value (the environment's tokens are each
// replica's) is not taken for it.
func (k Key) Proof(token string) string {
	m := hmac.New(sha256.New, k)
	m.Write([]byte("token\n" + token))
	return hex.EncodeToString(m.Sum(nil))
}

// Sign signs req, a call whose body is body to the replica target reached
// at targetURL, on behalf of who, at now.
func (k Key) Sign(req *http.Request, body []byte, target, targetURL string, who Identity, now time.Time) {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	h := req.Header
	h.Set(HeaderTarget, target)
	h.Set(HeaderTargetURL, targetURL)
	h.Set(HeaderTime, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderNonce, hex.EncodeToString(nonce[:]))
	h.Set(HeaderCaller, who.Name)
	h.Set(HeaderGroup, who.Group)
	h.Set(HeaderProof, who.Proof)
	h.Set(HeaderSignature, k.mac(req.Method, req.URL.RequestURI(), body, target, targetURL, h.Get(HeaderTime), h.Get(HeaderNonce), who))
}

// mac is the signature of a call: its method, path and query, the digest
// of its body, its target's id and URL, time, nonce and identity, each on
// a line of its own.
func (k Key) mac(method, uri string, body []byte, target, targetURL, at, nonce string, who Identity) string {
	digest := sha256.Sum256(body)
	return k.lines("call", method, uri, hex.EncodeToString(digest[:]), target, targetURL, at, nonce, who.Name, who.Group, who.Proof)
}

func (k Key) lines(parts ...string) string {
	m := hmac.New(sha256.New, k)
	for _, part := range parts {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// SignAnswer is the signature of a peer's answer to the call of that
// nonce: its status and body.
func (k Key) SignAnswer(nonce string, status int, body []byte) string {
	digest := sha256.Sum256(body)
	return k.lines("answer", nonce, strconv.Itoa(status), hex.EncodeToString(digest[:]))
}

// SignFrame is the signature of one frame of a peer's streamed answer to
// the call of that nonce: its status, the frame's place in the answer
// (0 first) and its bytes. A stream cannot be signed whole, so each frame
// is, and its place makes a frame dropped, repeated or moved one that
// does not hold.
func (k Key) SignFrame(nonce string, status int, index uint64, frame []byte) string {
	digest := sha256.Sum256(frame)
	return k.lines("frame", nonce, strconv.Itoa(status), strconv.FormatUint(index, 10), hex.EncodeToString(digest[:]))
}

// CheckFrame checks the frame at index of the answer of status to the
// call req, signed sig.
func (k Key) CheckFrame(req *http.Request, status int, index uint64, frame []byte, sig string) error {
	if !hmac.Equal([]byte(sig), []byte(k.SignFrame(req.Header.Get(HeaderNonce), status, index, frame))) {
		return ErrAnswerNotSigned
	}
	return nil
}

// ErrAnswerNotSigned is an answer the fleet key did not sign.
var ErrAnswerNotSigned = errors.New("its answer is not signed with the fleet key")

// CheckAnswer checks the answer res brought to the call req, its body
// body.
func (k Key) CheckAnswer(req *http.Request, res *http.Response, body []byte) error {
	want := k.SignAnswer(req.Header.Get(HeaderNonce), res.StatusCode, body)
	if !hmac.Equal([]byte(res.Header.Get(HeaderAnswer)), []byte(want)) {
		return ErrAnswerNotSigned
	}
	return nil
}

// Signed reports whether r claims to be a signed call of a peer.
func Signed(r *http.Request) bool { return r.Header.Get(HeaderSignature) != "" }

// Verifier checks the signed calls addressed to one replica, each once.
type Verifier struct {
	key       Key
	self, url string
	mu        sync.Mutex
	seen      map[string]time.Time // signature -> when it stops being within Skew
}

// maxSeen bounds the signatures remembered: past it, a call is refused
// until older ones expire (a flood of valid calls needs the key).
const maxSeen = 100_000

// NewVerifier checks calls to the replica self, advertised at url, signed
// with key.
func NewVerifier(key Key, self, url string) *Verifier {
	return &Verifier{key: key, self: self, url: url, seen: map[string]time.Time{}}
}

// ErrNotSigned is a call whose signature does not hold.
var ErrNotSigned = errors.New("not a call of this fleet")

// Verify checks r, whose body is body, at now and returns the identity it
// names. It fails for a call signed with another key, for another replica
// or another URL, with another body, outside Skew of now, or seen before.
func (v *Verifier) Verify(r *http.Request, body []byte, now time.Time) (Identity, error) {
	if v == nil || len(v.key) == 0 {
		return Identity{}, fmt.Errorf("%w: this replica has no fleet key", ErrNotSigned)
	}
	h := r.Header
	target, targetURL, at, nonce, sig := h.Get(HeaderTarget), h.Get(HeaderTargetURL), h.Get(HeaderTime), h.Get(HeaderNonce), h.Get(HeaderSignature)
	who := Identity{Name: h.Get(HeaderCaller), Group: h.Get(HeaderGroup), Proof: h.Get(HeaderProof)}
	if len(sig) != sha256.Size*2 || len(nonce) != 32 || len(who.Name) > 256 || len(who.Group) > 256 || len(who.Proof) > 64 ||
		len(target) > 64 || len(targetURL) > 2048 || len(at) > 20 {
		return Identity{}, fmt.Errorf("%w: malformed signature headers", ErrNotSigned)
	}
	want := v.key.mac(r.Method, r.URL.RequestURI(), body, target, targetURL, at, nonce, who)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return Identity{}, fmt.Errorf("%w: the signature does not match (another fleet key?)", ErrNotSigned)
	}
	if target != v.self || targetURL != v.url {
		return Identity{}, fmt.Errorf("%w: signed for replica %s at %s, not this one", ErrNotSigned, target, targetURL)
	}
	unix, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: malformed time", ErrNotSigned)
	}
	signed := time.Unix(unix, 0)
	if d := now.Sub(signed); d > Skew || d < -Skew {
		return Identity{}, fmt.Errorf("%w: signed at %s, more than %s from this replica's clock", ErrNotSigned, signed.UTC().Format(time.RFC3339), Skew)
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
		return Identity{}, fmt.Errorf("%w: this signature was used already", ErrNotSigned)
	}
	if len(v.seen) >= maxSeen {
		return Identity{}, fmt.Errorf("%w: too many signed calls at once", ErrNotSigned)
	}
	v.seen[sig] = signed.Add(Skew)
	return who, nil
}
