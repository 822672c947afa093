package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// What auto keeps in its state directory. The keys are mode 0600, the
// directory 0700; the CA's certificate is also written to ca_file.
const (
	caCertFile   = "ca.pem"
	caKeyFile    = "ca-key.pem"
	leafCertFile = "cert.pem"
	leafKeyFile  = "key.pem"
)

// Lifetimes (SPEC §18.4): the CA lasts a year, since clients were told to
// trust it and a key that leaks should not outlive that; the certificate
// 90 days, made again when it ends within soon, or when the listener's
// names change.
const (
	caLife   = 365 * 24 * time.Hour
	leafLife = 90 * 24 * time.Hour
	// backdate covers a client whose clock is a little behind.
	backdate = time.Hour
)

// AutoOptions say where auto keeps its state and what the certificate is
// for.
type AutoOptions struct {
	// StateDir keeps the CA and the certificate with their keys.
	StateDir string
	// CAFile receives the CA's certificate, for clients to trust.
	CAFile string
	// Names are the DNS names and IP addresses the certificate is for
	// (Names makes them).
	Names []string
	Log   *slog.Logger
	// Now is the time the certificates are checked and made at; the
	// clock's when zero.
	Now time.Time
}

// Auto makes a CA and a certificate for o.Names under it on first start,
// keeps both in o.StateDir, and reuses them while they are valid: the
// certificate is made again when it ends within 30 days or its names
// changed, the CA only when it cannot be used. The CA's certificate is
// written to o.CAFile.
func Auto(o AutoOptions) (*Source, error) {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	if len(o.Names) == 0 {
		return nil, errors.New("the certificate would name no host")
	}
	dir := o.StateDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%s: the state directory cannot be made: %v", dir, unwrapPath(err))
	}
	// What others could read is closed before anything is read or made.
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700}, {filepath.Join(dir, caKeyFile), 0o600}, {filepath.Join(dir, leafKeyFile), 0o600}} {
		if err := private(f.path, f.mode, o.Log); err != nil {
			return nil, err
		}
	}
	ca, err := keptCA(dir, o.CAFile, o.Names, now, o.Log)
	if err != nil {
		return nil, err
	}
	leaf, why := keptLeaf(dir, ca, o.Names, now)
	if leaf == nil {
		if leaf, err = makeLeaf(dir, ca, o.Names, now); err != nil {
			return nil, err
		}
		o.Log.Info("made the proxy listener's certificate", "names", strings.Join(o.Names, ","), "why", why,
			"not_after", leaf.Leaf.NotAfter.UTC().Format(time.RFC3339), "state_dir", dir)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Leaf.Raw})
	if old, err := os.ReadFile(o.CAFile); err != nil || string(old) != string(caPEM) {
		if err := writeFile(o.CAFile, caPEM, 0o644); err != nil {
			return nil, err
		}
	}
	return Fixed(leaf), nil
}

// private makes path (when it exists) no wider than mode, and says so
// when it was: a key or a state directory open to other users is closed,
// or the start is refused.
func private(path string, mode os.FileMode, log *slog.Logger) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %v", path, unwrapPath(err))
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s: is a symbolic link; the TLS state directory and its keys must be Doppel's own files", path)
	}
	was := st.Mode().Perm()
	if was&^mode == 0 {
		return nil
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("%s: is mode %04o, open to other users, and cannot be made %04o: %v", path, was, mode, unwrapPath(err))
	}
	log.Warn(fmt.Sprintf("the TLS state was open to other users: %s was mode %04o and is now %04o", path, was, mode), "path", path)
	return nil
}

// keptCA is the CA in dir when it can be used for names, else a new one,
// name-constrained to them.
func keptCA(dir, caFile string, names []string, now time.Time, log *slog.Logger) (*tls.Certificate, error) {
	certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	_, certErr := os.Stat(certPath)
	_, keyErr := os.Stat(keyPath)
	if certErr == nil || keyErr == nil {
		ca, err := LoadPair(certPath, keyPath, now)
		switch {
		case err != nil:
		case !ca.Leaf.IsCA || ca.Leaf.KeyUsage&x509.KeyUsageCertSign == 0:
			err = fmt.Errorf("%s: is not a CA certificate", certPath)
		case ca.Leaf.NotAfter.Sub(now) < soon:
			err = fmt.Errorf("%s: the CA expires on %s", certPath, ca.Leaf.NotAfter.UTC().Format(timeFormat))
		case !ca.Leaf.PermittedDNSDomainsCritical:
			err = fmt.Errorf("%s: the CA has no name constraints (made by an earlier Doppel), so it could vouch for any site", certPath)
		default:
			if n := uncovered(ca.Leaf, names); n != "" {
				err = fmt.Errorf("%s: the CA's name constraints do not cover %s", certPath, n)
			}
		}
		if err == nil {
			return ca, nil
		}
		log.Warn("the kept CA cannot be used, so a new one is made: clients must trust the new ca_file "+caFile+"; "+err.Error(), "state_dir", dir, "ca_file", caFile)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber: serial,
		// A CA of its own per state directory: the serial's start tells
		// them apart in a trust store.
		Subject:               pkix.Name{CommonName: fmt.Sprintf("Doppel CA %x", serial.Bytes()[:4]), Organization: []string{"Doppel"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caLife),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	constrain(tpl, names)
	ca, err := sign(tpl, tpl, key, key)
	if err != nil {
		return nil, err
	}
	if err := keep(certPath, keyPath, ca); err != nil {
		return nil, err
	}
	log.Info("made a CA for the proxy listener's certificate, name-constrained to "+strings.Join(names, ","), "subject", ca.Leaf.Subject.CommonName,
		"not_after", ca.Leaf.NotAfter.UTC().Format(time.RFC3339), "state_dir", dir, "ca_file", caFile)
	return ca, nil
}

// loopback are the addresses a CA made for names always permits: a
// listener on loopback is reached by any of them.
var loopback = []*net.IPNet{
	{IP: net.IPv4(127, 0, 0, 0).To4(), Mask: net.CIDRMask(8, 32)},
	{IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)},
}

// constrain limits the CA tpl to names (SPEC §18.4): it may vouch for
// those DNS names (and names under them), localhost, loopback addresses
// and the addresses among names, and for nothing else, critically, so a
// client that trusts it trusts it for Doppel's listener only.
func constrain(tpl *x509.Certificate, names []string) {
	tpl.PermittedDNSDomainsCritical = true
	tpl.PermittedDNSDomains = []string{"localhost"}
	tpl.PermittedIPRanges = slices.Clone(loopback)
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			if uncoveredIP(tpl.PermittedIPRanges, ip) {
				bits := 8 * len(ip.To16())
				if v4 := ip.To4(); v4 != nil {
					ip, bits = v4, 32
				}
				tpl.PermittedIPRanges = append(tpl.PermittedIPRanges, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			}
		} else if !slices.Contains(tpl.PermittedDNSDomains, n) {
			tpl.PermittedDNSDomains = append(tpl.PermittedDNSDomains, n)
		}
	}
}

// uncovered is the first of names the CA's constraints do not permit, or "".
func uncovered(ca *x509.Certificate, names []string) string {
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			if uncoveredIP(ca.PermittedIPRanges, ip) {
				return n
			}
			continue
		}
		if !slices.ContainsFunc(ca.PermittedDNSDomains, func(d string) bool {
			return strings.EqualFold(n, d) || strings.HasSuffix(strings.ToLower(n), "."+strings.ToLower(d))
		}) {
			return n
		}
	}
	return ""
}

func uncoveredIP(ranges []*net.IPNet, ip net.IP) bool {
	return !slices.ContainsFunc(ranges, func(r *net.IPNet) bool { return r.Contains(ip) })
}

// keptLeaf is the certificate in dir when it can be used; else nil and
// why not.
func keptLeaf(dir string, ca *tls.Certificate, names []string, now time.Time) (*tls.Certificate, string) {
	certPath, keyPath := filepath.Join(dir, leafCertFile), filepath.Join(dir, leafKeyFile)
	if _, err := os.Stat(certPath); errors.Is(err, fs.ErrNotExist) {
		return nil, "none was kept"
	}
	leaf, err := LoadPair(certPath, keyPath, now)
	switch {
	case err != nil:
		return nil, err.Error()
	case leaf.Leaf.CheckSignatureFrom(ca.Leaf) != nil:
		return nil, "the kept one was not made by the CA"
	case leaf.Leaf.NotAfter.Sub(now) < soon:
		return nil, "the kept one expires on " + leaf.Leaf.NotAfter.UTC().Format(timeFormat)
	case !slices.Equal(namesOf(leaf.Leaf), names):
		return nil, "the kept one is for " + strings.Join(namesOf(leaf.Leaf), ",")
	}
	// The CA is not sent: clients have it.
	leaf.Certificate = leaf.Certificate[:1]
	return leaf, ""
}

func makeLeaf(dir string, ca *tls.Certificate, names []string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: names[0], Organization: []string{"Doppel"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(leafLife),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if tpl.NotAfter.After(ca.Leaf.NotAfter) {
		tpl.NotAfter = ca.Leaf.NotAfter
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tpl.IPAddresses = append(tpl.IPAddresses, ip)
		} else {
			tpl.DNSNames = append(tpl.DNSNames, n)
		}
	}
	leaf, err := sign(tpl, ca.Leaf, key, ca.PrivateKey.(crypto.Signer))
	if err != nil {
		return nil, err
	}
	if err := keep(filepath.Join(dir, leafCertFile), filepath.Join(dir, leafKeyFile), leaf); err != nil {
		return nil, err
	}
	return leaf, nil
}

// sign makes the certificate tpl for key, signed by parent's key.
func sign(tpl, parent *x509.Certificate, key *ecdsa.PrivateKey, parentKey crypto.Signer) (*tls.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, tpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, fmt.Errorf("cannot make a certificate: %v", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}, nil
}

// keep writes a certificate and its key, the key first and mode 0600.
func keep(certPath, keyPath string, c *tls.Certificate) error {
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		return err
	}
	if err := writeFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Leaf.Raw}), 0o644)
}

// writeFile replaces path with data at once (a temporary file renamed
// over it), so that a reader never sees half of it.
func writeFile(path string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".*")
	if err != nil {
		return fmt.Errorf("%s: cannot be written: %v", path, unwrapPath(err))
	}
	tmp := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("%s: cannot be written: %v", path, unwrapPath(err))
	}
	return nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

// Names are what a listener bound to host is reached by, for its
// certificate: host itself (not a wildcard address), and for a loopback
// or wildcard bind also localhost, 127.0.0.1 and ::1; then each of extra
// (an external URL's host). Addresses are written the standard way,
// names in lower case; sorted, each once.
func Names(host string, extra ...string) []string {
	set := map[string]bool{}
	add := func(h string) {
		h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
		if a, err := netip.ParseAddr(h); err == nil {
			if a.IsUnspecified() {
				return
			}
			h = a.WithZone("").Unmap().String()
		}
		if h != "" {
			set[h] = true
		}
	}
	add(host)
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if (err == nil && (a.IsLoopback() || a.IsUnspecified())) || strings.EqualFold(host, "localhost") || host == "" {
		add("localhost")
		add("127.0.0.1")
		add("::1")
	}
	for _, e := range extra {
		add(e)
	}
	return slices.Sorted(maps.Keys(set))
}

// namesOf are a certificate's DNS names and addresses as Names writes
// them, sorted.
func namesOf(c *x509.Certificate) []string {
	var out []string
	for _, n := range c.DNSNames {
		out = append(out, strings.ToLower(n))
	}
	for _, ip := range c.IPAddresses {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap().String())
		}
	}
	slices.Sort(out)
	return out
}
