// Package certstest makes certificates for tests: a CA, and server
// certificates under it for localhost and 127.0.0.1, each parsed and in
// PEM, so that a test of TLS builds its chain from one recipe instead of
// its own copy of crypto/x509's ceremony.
//
// It is imported only by tests; nothing in the product links it.
package certstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is a certificate made for a test, with its key, parsed and in PEM.
type Cert struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte // PKCS #8, as "PRIVATE KEY"
}

// Issue makes a certificate valid from notBefore to notAfter: a CA when
// parent is nil, else a server certificate for localhost and 127.0.0.1
// signed by parent. Its serial is random, so that two certificates a test
// makes are told apart by it.
func Issue(t testing.TB, parent *Cert, notBefore, notAfter time.Time) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 100))
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	signer, signerKey := tpl, key
	if parent == nil {
		tpl.Subject.CommonName, tpl.DNSNames, tpl.IPAddresses = "doppel test CA", nil, nil
		tpl.IsCA, tpl.BasicConstraintsValid = true, true
		tpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, signer, key.Public(), signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &Cert{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}),
	}
}

// PKI is a CA and a server certificate under it, both valid now; the CA
// outlives the certificate, as a real one does.
func PKI(t testing.TB) (ca, leaf *Cert) {
	t.Helper()
	now := time.Now()
	ca = Issue(t, nil, now.Add(-time.Hour), now.Add(48*time.Hour))
	return ca, Issue(t, ca, now.Add(-time.Hour), now.Add(24*time.Hour))
}

// Pool is a pool holding c alone, for a client that trusts it as a root.
func (c *Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}

// Files writes c as cert.pem and key.pem in dir, the key readable by its
// owner alone as a real one is kept, and returns their paths.
func (c *Cert) Files(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, c.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
