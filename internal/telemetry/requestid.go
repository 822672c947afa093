package telemetry

import (
	"crypto/rand"
	"encoding/hex"
)

// NewRequestID mints the id of an exchange the client did not name: 128
// random bits as 32 lowercase hex digits, 1.1's form (SPEC §19.4), so that
// logs and journals read the same whichever binary wrote them. The bytes
// stay on the stack; the string is the one allocation.
func NewRequestID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand's guarantee)
	var out [32]byte
	hex.Encode(out[:], raw[:])
	return string(out[:])
}
