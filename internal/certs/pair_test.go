package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/certs/certstest"
)

// TestLoadPairRefusesBadInput: each mistake is refused with the file it
// is about and what is wrong with it.
func TestLoadPairRefusesBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, leaf := certstest.PKI(t)
	_, other := certstest.PKI(t)
	now := time.Now()
	expired := certstest.Issue(t, ca, now.Add(-48*time.Hour), now.Add(-time.Hour))
	early := certstest.Issue(t, ca, now.Add(time.Hour), now.Add(48*time.Hour))
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalECPrivateKey(ecKey)
	big := bytes.Repeat([]byte("#"), MaxFileSize+1)
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: ecDER})

	for _, c := range []struct {
		name      string
		cert, key []byte
		blame     string // "cert" or "key": the file the message must name first
		says      string
	}{
		{"mismatched key", leaf.CertPEM, other.KeyPEM, "key", "the key does not match the certificate in"},
		{"the CA's key", append(bytes.Clone(leaf.CertPEM), ca.CertPEM...), ca.KeyPEM, "key", "the key is that of certificate 2"},
		{"not PEM", []byte("hello, I am not a certificate\n"), leaf.KeyPEM, "cert", "is not PEM: no -----BEGIN block"},
		{"DER", leaf.Cert.Raw, leaf.KeyPEM, "cert", "is not PEM"},
		{"broken PEM", []byte("-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n"), leaf.KeyPEM, "cert", "is not valid PEM"},
		{"swapped", leaf.KeyPEM, leaf.CertPEM, "cert", "holds no CERTIFICATE block, only PRIVATE KEY; is it the key?"},
		{"key beside the certificate", append(bytes.Clone(leaf.CertPEM), leaf.KeyPEM...), leaf.KeyPEM, "cert", "holds a private key (PRIVATE KEY) beside the certificates"},
		{"key file holds a certificate", leaf.CertPEM, ca.CertPEM, "key", "holds no private key, only CERTIFICATE; is it the certificate?"},
		{"bad certificate bytes", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}), leaf.KeyPEM, "cert", "certificate 1 cannot be parsed"},
		{"bad key bytes", leaf.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}), "key", "the PRIVATE KEY cannot be parsed"},
		{"encrypted key", leaf.CertPEM, encrypted, "key", "the private key is encrypted"},
		{"two keys", leaf.CertPEM, append(bytes.Clone(leaf.KeyPEM), other.KeyPEM...), "key", "more than one private key"},
		{"expired", expired.CertPEM, expired.KeyPEM, "cert", "the certificate expired on " + expired.Cert.NotAfter.UTC().Format(timeFormat)},
		{"not yet valid", early.CertPEM, early.KeyPEM, "cert", "the certificate is not valid until"},
		{"too big", big, leaf.KeyPEM, "cert", "a certificate or key file is at most 1048576"},
		{"empty", nil, leaf.KeyPEM, "cert", "is not PEM"},
	} {
		sub := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		certFile, keyFile := write(t, sub, "cert.pem", c.cert), write(t, sub, "key.pem", c.key)
		_, err := LoadPair(certFile, keyFile, now)
		blamed := map[string]string{"cert": certFile, "key": keyFile}[c.blame]
		if err == nil || !strings.HasPrefix(err.Error(), blamed+": ") || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: got %v, want %s: ...%s...", c.name, err, blamed, c.says)
		}
	}

	certFile := write(t, dir, "cert.pem", leaf.CertPEM)
	missing := filepath.Join(dir, "nowhere.pem")
	if _, err := LoadPair(certFile, missing, now); err == nil || err.Error() != missing+": cannot be read: no such file or directory" {
		t.Errorf("a missing key: %v", err)
	}
	if _, err := LoadPair(dir, missing, now); err == nil || !strings.Contains(err.Error(), dir+": is a directory") {
		t.Errorf("a directory: %v", err)
	}
}

// TestLoadPairAcceptsEveryKeyForm: PKCS #8, SEC 1 and PKCS #1 keys load,
// text around the blocks is allowed, and the chain keeps its order.
func TestLoadPairAcceptsEveryKeyForm(t *testing.T) {
	t.Parallel()
	ca, leaf := certstest.PKI(t)
	chain := append([]byte("subject=CN = localhost\n"), leaf.CertPEM...)
	chain = append(chain, ca.CertPEM...)
	got, err := ParsePair(chain, leaf.KeyPEM, "c", "k", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Certificate) != 2 || !bytes.Equal(got.Certificate[0], leaf.Cert.Raw) || got.Leaf.SerialNumber.Cmp(leaf.Cert.SerialNumber) != 0 {
		t.Errorf("the chain: %d certificates, leaf %v", len(got.Certificate), got.Leaf.SerialNumber)
	}

	ecDER, _ := x509.MarshalECPrivateKey(leaf.Key)
	sec1 := append([]byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER})...)
	if _, err := ParsePair(leaf.CertPEM, sec1, "c", "k", time.Now()); err != nil {
		t.Errorf("SEC 1 with parameters: %v", err)
	}
	// An RSA key of another certificate parses, and is refused as not its.
	if _, err := ParsePair(leaf.CertPEM, rsaKeyPEM(t), "c", "k", time.Now()); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("PKCS #1: %v", err)
	}
}
