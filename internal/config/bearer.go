package config

import (
	"crypto/sha256"
	"strings"
)

// TokenDigest is what tokens are compared by: a fixed-size digest, so that
// a comparison takes the same time whatever the lengths of the token
// presented and the token configured.
type TokenDigest [sha256.Size]byte

// DigestOf digests a token's value.
func DigestOf(value string) TokenDigest { return sha256.Sum256([]byte(value)) }

// Bearer reads `Bearer <token>` from the value of the auth header: the
// token, or false when the value is not of that form.
func Bearer(raw string) (string, bool) {
	scheme, value, ok := strings.Cut(strings.TrimSpace(raw), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(value), true
}
