package certs

import (
	"bytes"
	"crypto"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/certs/certstest"
)

// FuzzParsePair: any two files are refused with an error naming one of
// them, or read into a certificate whose key is its leaf's, valid at the
// time given. Never a panic.
func FuzzParsePair(f *testing.F) {
	ca, leaf := certstest.PKI(f)
	f.Add(leaf.CertPEM, leaf.KeyPEM)
	f.Add(append(bytes.Clone(leaf.CertPEM), ca.CertPEM...), ca.KeyPEM)
	f.Add(leaf.KeyPEM, leaf.CertPEM)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte("-----BEGIN X-----\nProc-Type: 4,ENCRYPTED\n\nAA==\n-----END X-----\n"), rsaKeyPEM(f))
	now := time.Now()
	f.Fuzz(func(t *testing.T, certPEM, keyPEM []byte) {
		c, err := ParsePair(certPEM, keyPEM, "CERT", "KEY", now)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "CERT: ") && !strings.HasPrefix(msg, "KEY: ") {
				t.Fatalf("the error names neither file: %v", err)
			}
			return
		}
		if !publicKeyOf(c.PrivateKey.(crypto.Signer)).Equal(c.Leaf.PublicKey) {
			t.Fatal("a certificate was read with a key that is not its")
		}
		if now.Before(c.Leaf.NotBefore) || now.After(c.Leaf.NotAfter) {
			t.Fatal("a certificate outside its validity was read")
		}
	})
}
