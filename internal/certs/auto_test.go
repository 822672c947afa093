package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/certs/certstest"
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

	// Other names the CA's constraints cover: a new certificate under the
	// same CA.
	opts.Names = Names("127.0.0.1", "api.localhost")
	renamed, err := Auto(opts)
	if err != nil {
		t.Fatal(err)
	}
	if renamed.Certificate().Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) == 0 || read(t, filepath.Join(state, caCertFile)) != caBefore {
		t.Error("a change of names did not make a new certificate under the kept CA")
	}
	verify(t, caFile, renamed.Certificate(), "api.localhost")

	// A name the constraints do not cover: a new CA, said so.
	opts.Names = Names("127.0.0.1", "doppel.test")
	widened, err := Auto(opts)
	if err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(state, caCertFile)) == caBefore || !strings.Contains(log.String(), "do not cover doppel.test") {
		t.Errorf("a name outside the CA's constraints kept the CA:\n%s", log.String())
	}
	verify(t, caFile, widened.Certificate(), "doppel.test")
	renamed, caBefore = widened, read(t, filepath.Join(state, caCertFile))

	// 70 days on, the certificate (90 days) ends within 30 days: made
	// again; the CA (a year) is kept.
	opts.Now = time.Now().Add(70 * 24 * time.Hour)
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

// TestAutoCAIsConstrainedAndShortLived (SPEC §18.4): the CA vouches for
// the listener's names only, for a year, its certificate for 90 days; a
// certificate it signed for another site does not verify.
func TestAutoCAIsConstrainedAndShortLived(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var log logs
	now := time.Now()
	src, err := Auto(AutoOptions{StateDir: filepath.Join(dir, "state"), CAFile: filepath.Join(dir, "ca.pem"), Names: Names("0.0.0.0", "doppel.test", "10.1.2.3"), Log: log.logger(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := LoadPair(filepath.Join(dir, "state", caCertFile), filepath.Join(dir, "state", caKeyFile), now)
	if err != nil {
		t.Fatal(err)
	}
	if life := ca.Leaf.NotAfter.Sub(now); life > 366*24*time.Hour || life < 364*24*time.Hour {
		t.Errorf("the CA lasts %v, want a year", life)
	}
	if life := src.Certificate().Leaf.NotAfter.Sub(now); life > 91*24*time.Hour || life < 89*24*time.Hour {
		t.Errorf("the certificate lasts %v, want 90 days", life)
	}
	if !ca.Leaf.PermittedDNSDomainsCritical || !slices.Equal(ca.Leaf.PermittedDNSDomains, []string{"localhost", "doppel.test"}) {
		t.Errorf("the CA's DNS constraints: %v (critical %v)", ca.Leaf.PermittedDNSDomains, ca.Leaf.PermittedDNSDomainsCritical)
	}
	for _, name := range []string{"localhost", "doppel.test", "127.0.0.1", "::1", "10.1.2.3"} {
		verify(t, filepath.Join(dir, "ca.pem"), src.Certificate(), name)
	}
	// A certificate the CA's key signs for another site is refused by a
	// client trusting the CA.
	for _, other := range []string{"bank.example", "10.1.2.4"} {
		tpl := &x509.Certificate{SerialNumber: big.NewInt(7), NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		if ip := net.ParseIP(other); ip != nil {
			tpl.IPAddresses = []net.IP{ip}
		} else {
			tpl.DNSNames = []string{other}
		}
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		rogue, err := sign(tpl, ca.Leaf, key, ca.PrivateKey.(crypto.Signer))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(ca.Leaf)
		if _, err := rogue.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: other}); err == nil {
			t.Errorf("the CA vouches for %s", other)
		}
	}
}

// TestAutoClosesWhatIsOpen: a state directory and keys open to other
// users are made 0700 and 0600, and the log says what they were and are;
// a CA an earlier Doppel made without name constraints is replaced, the
// log naming ca_file.
func TestAutoClosesWhatIsOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state, caFile := filepath.Join(dir, "state"), filepath.Join(dir, "ca.pem")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := certstest.Issue(t, nil, now.Add(-time.Hour), now.Add(5*365*24*time.Hour))
	write(t, state, caCertFile, old.CertPEM)
	write(t, state, caKeyFile, old.KeyPEM)
	if err := os.Chmod(filepath.Join(state, caKeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	var log logs
	src, err := Auto(AutoOptions{StateDir: state, CAFile: caFile, Names: Names("127.0.0.1"), Log: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{state: 0o700, filepath.Join(state, caKeyFile): 0o600, filepath.Join(state, leafKeyFile): 0o600} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %04o", path, st.Mode().Perm(), err, want)
		}
	}
	got := log.String()
	for _, want := range []string{
		state + " was mode 0755 and is now 0700",
		filepath.Join(state, caKeyFile) + " was mode 0644 and is now 0600",
		"the CA has no name constraints",
		"clients must trust the new ca_file " + caFile,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the log does not say %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Doppel makes the directory 0700") {
		t.Errorf("the log says what did not happen:\n%s", got)
	}
	verify(t, caFile, src.Certificate(), "localhost")
	if read(t, filepath.Join(state, caCertFile)) == string(old.CertPEM) {
		t.Error("the unconstrained CA was kept")
	}
}
