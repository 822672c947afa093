// Package certs is the proxy listener's certificate (SPEC §17.7): a pair
// of PEM files checked at load and read again when they change, or a
// certificate made under a CA of Doppel's own and kept across restarts.
// Handshakes take the certificate in force from an atomic pointer; nothing
// on the request path reads a file.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// MaxFileSize bounds a certificate or key file: a chain is a few KiB, so
// more is a wrong path, refused before it is read.
const MaxFileSize = 1 << 20

// timeFormat is how validity is written in messages.
const timeFormat = "2006-01-02 15:04:05 UTC"

// LoadPair reads the certificate chain in certFile (the leaf first) and
// its private key in keyFile, and checks them at now: both PEM, the key
// the leaf's, the leaf valid. Every error names the file it is about.
func LoadPair(certFile, keyFile string, now time.Time) (*tls.Certificate, error) {
	certPEM, err := readBounded(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readBounded(keyFile)
	if err != nil {
		return nil, err
	}
	return ParsePair(certPEM, keyPEM, certFile, keyFile, now)
}

// readBounded reads a whole file of at most MaxFileSize bytes.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot be read: %v", path, unwrapPath(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory, not a PEM file", path)
	} else if err == nil && st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s: is %d bytes; a certificate or key file is at most %d", path, st.Size(), MaxFileSize)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: cannot be read: %v", path, unwrapPath(err))
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%s: is over %d bytes; a certificate or key file is at most that", path, MaxFileSize)
	}
	return b, nil
}

// unwrapPath drops the path a *PathError repeats: the message names it
// first already.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ParsePair is LoadPair on the files' contents; the names are what the
// messages call them.
func ParsePair(certPEM, keyPEM []byte, certName, keyName string, now time.Time) (*tls.Certificate, error) {
	chain, err := parseChain(certPEM, certName)
	if err != nil {
		return nil, err
	}
	key, err := parseKey(keyPEM, keyName)
	if err != nil {
		return nil, err
	}
	leaf := chain[0]
	if !publicKeyOf(key).Equal(leaf.PublicKey) {
		for i, c := range chain[1:] {
			if publicKeyOf(key).Equal(c.PublicKey) {
				return nil, fmt.Errorf("%s: the key is that of certificate %d in %s, not of the first; the server's own certificate (the leaf) goes first", keyName, i+2, certName)
			}
		}
		return nil, fmt.Errorf("%s: the key does not match the certificate in %s (%s)", keyName, certName, describe(leaf))
	}
	if err := checkValid(leaf, certName, now); err != nil {
		return nil, err
	}
	out := &tls.Certificate{PrivateKey: key, Leaf: leaf}
	for _, c := range chain {
		out.Certificate = append(out.Certificate, c.Raw)
	}
	return out, nil
}

// checkValid refuses a certificate outside its validity at now.
func checkValid(c *x509.Certificate, name string, now time.Time) error {
	switch {
	case now.Before(c.NotBefore):
		return fmt.Errorf("%s: the certificate is not valid until %s (%s)", name, c.NotBefore.UTC().Format(timeFormat), describe(c))
	case now.After(c.NotAfter):
		return fmt.Errorf("%s: the certificate expired on %s (%s)", name, c.NotAfter.UTC().Format(timeFormat), describe(c))
	}
	return nil
}

// describe names a certificate in a message: its subject and serial.
func describe(c *x509.Certificate) string {
	subject := c.Subject.CommonName
	if subject == "" && len(c.DNSNames) > 0 {
		subject = c.DNSNames[0]
	}
	if subject == "" {
		subject = c.Subject.String()
	}
	return fmt.Sprintf("subject %q, serial %x", subject, c.SerialNumber)
}

// blocks splits a PEM file into its blocks. Text between blocks is
// allowed (openssl writes a readable header before each certificate);
// a file without a single block is not PEM, and the message says how a
// DER file of its kind converts.
func blocks(data []byte, name, convert string) ([]*pem.Block, error) {
	var out []*pem.Block
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		if bytes.Contains(data, []byte("-----BEGIN")) {
			return nil, fmt.Errorf("%s: is not valid PEM: a -----BEGIN line has no matching -----END line or its base64 is broken", name)
		}
		return nil, fmt.Errorf("%s: is not PEM: no -----BEGIN block in it (a DER file converts with %s)", name, convert)
	}
	return out, nil
}

// parseChain reads the CERTIFICATE blocks of a file, in order.
func parseChain(data []byte, name string) ([]*x509.Certificate, error) {
	bs, err := blocks(data, name, "openssl x509 -inform der")
	if err != nil {
		return nil, err
	}
	var chain []*x509.Certificate
	var other []string
	for _, b := range bs {
		if b.Type != "CERTIFICATE" {
			other = append(other, b.Type)
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d cannot be parsed: %v", name, len(chain)+1, err)
		}
		chain = append(chain, c)
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("%s: holds no CERTIFICATE block, only %s; is it the key?", name, typeList(other))
	}
	for _, t := range other {
		if isKeyType(t) {
			return nil, fmt.Errorf("%s: holds a private key (%s) beside the certificates; keep the key in its own file, named by key", name, t)
		}
	}
	return chain, nil
}

// parseKey reads the one private key of a file: PKCS #8, PKCS #1 (RSA) or
// SEC 1 (EC), unencrypted.
func parseKey(data []byte, name string) (crypto.Signer, error) {
	bs, err := blocks(data, name, "openssl pkey -inform der")
	if err != nil {
		return nil, err
	}
	var found *pem.Block
	var other []string
	for _, b := range bs {
		switch {
		case b.Type == "EC PARAMETERS": // openssl ecparam writes it before the key
		case isKeyType(b.Type):
			if found != nil {
				return nil, fmt.Errorf("%s: holds more than one private key; keep the certificate's alone", name)
			}
			found = b
		default:
			other = append(other, b.Type)
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%s: holds no private key, only %s; is it the certificate?", name, typeList(other))
	}
	if found.Type == "ENCRYPTED PRIVATE KEY" || found.Headers["Proc-Type"] != "" {
		return nil, fmt.Errorf("%s: the private key is encrypted; Doppel reads an unencrypted key (openssl pkey -in KEY -out PLAIN)", name)
	}
	var key any
	switch found.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(found.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(found.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(found.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: the %s cannot be parsed: %v", name, found.Type, err)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return k.(crypto.Signer), nil
	}
	return nil, fmt.Errorf("%s: a %T is not a key TLS can sign with; use RSA, ECDSA or Ed25519", name, key)
}

func isKeyType(t string) bool {
	switch t {
	case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
		return true
	}
	return false
}

func typeList(types []string) string {
	if len(types) == 0 {
		return "nothing"
	}
	return strings.Join(types, ", ")
}

// publicKeyOf is a signer's public key, comparable with Equal.
func publicKeyOf(k crypto.Signer) interface{ Equal(crypto.PublicKey) bool } {
	return k.Public().(interface{ Equal(crypto.PublicKey) bool })
}
