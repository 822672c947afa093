package certs

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// verify checks that leaf verifies for name against the CA in caFile.
func verify(t *testing.T, caFile string, leaf *tls.Certificate, name string) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(read(t, caFile))) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
		t.Errorf("for %s: %v", name, err)
	}
}

// TestAutoMakesAndKeeps: the first start makes a CA and a certificate for
// the names, keys 0600 in a 0700 directory, the CA's certificate alone in
// ca_file; later starts reuse both, make the certificate again when its
// names change or it ends within 30 days, and keep the CA.
func TestAutoMakesAndKeeps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state, caFile := filepath.Join(dir, "state"), filepath.Join(dir, "ca.pem")
	var log logs
	opts := AutoOptions{StateDir: state, CAFile: caFile, Names: Names("127.0.0.1"), Log: log.logger()}
	src, err := Auto(opts)
	if err != nil {
		t.Fatal(err)
	}
	first := src.Certificate()
	for _, name := range []string{"localhost", "127.0.0.1", "::1"} {
		verify(t, caFile, first, name)
	}
	if ca := read(t, caFile); strings.Contains(ca, "PRIVATE") || strings.Count(ca, "BEGIN CERTIFICATE") != 1 {
		t.Errorf("ca_file holds more than the CA's certificate:\n%s", ca)
	}
	for name, want := range map[string]os.FileMode{"": 0o700, caKeyFile: 0o600, leafKeyFile: 0o600, caCertFile: 0o644, leafCertFile: 0o644} {
		if st, err := os.Stat(filepath.Join(state, name)); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %04o", filepath.Join(state, name), st.Mode().Perm(), err, want)
		}
	}
	if len(first.Certificate) != 1 {
		t.Errorf("the handshake sends %d certificates, want the leaf alone", len(first.Certificate))
	}
	if got := log.String(); !strings.Contains(got, "made a CA") || !strings.Contains(got, "made the proxy listener's certificate") {
		t.Errorf("the log:\n%s", got)
	}
	caBefore := read(t, filepath.Join(state, caCertFile))

	// A restart: the same certificate.
	again, err := Auto(opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Certificate().Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Error("a restart made a new certificate")
	}

	// Other names: a new certificate under the same CA.
	opts.Names = Names("127.0.0.1", "doppel.test")
	renamed, err := Auto(opts)
	if err != nil {
		t.Fatal(err)
	}
	if renamed.Certificate().Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) == 0 || read(t, filepath.Join(state, caCertFile)) != caBefore {
		t.Error("a change of names did not make a new certificate under the kept CA")
	}
	verify(t, caFile, renamed.Certificate(), "doppel.test")

	// 340 days on, the certificate ends within 30 days: made again.
	opts.Now = time.Now().Add(340 * 24 * time.Hour)
	later, err := Auto(opts)
	if err != nil {
		t.Fatal(err)
	}
	if later.Certificate().Leaf.SerialNumber.Cmp(renamed.Certificate().Leaf.SerialNumber) == 0 || read(t, filepath.Join(state, caCertFile)) != caBefore {
		t.Error("a certificate near its end was kept, or the CA was not")
	}

	// A CA whose key is lost: a new CA, said so, and ca_file follows.
	if err := os.WriteFile(filepath.Join(state, caKeyFile), []byte("lost"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts.Now = time.Time{}
	remade, err := Auto(opts)
	if err != nil {
		t.Fatal(err)
	}
	if read(t, caFile) == caBefore || !strings.Contains(log.String(), "clients must trust the new ca_file") {
		t.Errorf("a broken CA was not replaced and said so:\n%s", log.String())
	}
	verify(t, caFile, remade.Certificate(), "localhost")
}

// TestAutoRefusesWhatItCannotWrite: a ca_file in a missing directory is
// named in the error.
func TestAutoRefusesWhatItCannotWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "missing", "ca.pem")
	var log logs
	_, err := Auto(AutoOptions{StateDir: filepath.Join(dir, "state"), CAFile: caFile, Names: Names("127.0.0.1"), Log: log.logger()})
	if err == nil || !strings.HasPrefix(err.Error(), caFile+": cannot be written") {
		t.Errorf("got %v", err)
	}
}
