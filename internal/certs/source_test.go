package certs

import (
	"crypto/tls"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/certs/certstest"
)

// replace writes b to path the way tools do: a new file renamed over it.
func replace(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls until ok or a few seconds have passed.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 5 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWatchReloads: a replaced pair is in force for new handshakes within
// a few seconds; a broken replacement is logged with its path and the
// last good pair stays; a repair is taken again.
func TestWatchReloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, first := certstest.PKI(t)
	certFile, keyFile := first.Files(t, dir)
	var log logs
	src, err := Watch(certFile, keyFile, log.logger())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	serial := func() string { return src.Certificate().Leaf.SerialNumber.String() }
	if serial() != first.Cert.SerialNumber.String() {
		t.Fatalf("serving %s, want the first certificate", serial())
	}

	second := certstest.Issue(t, ca, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	replace(t, keyFile, second.KeyPEM)
	replace(t, certFile, second.CertPEM)
	waitFor(t, "the reload", func() bool { return serial() == second.Cert.SerialNumber.String() })
	if !strings.Contains(log.String(), "new handshakes present it") {
		t.Errorf("no line says it changed:\n%s", log.String())
	}

	replace(t, certFile, []byte("garbage\n"))
	waitFor(t, "the refusal's line", func() bool { return strings.Contains(log.String(), certFile+": is not PEM") })
	if serial() != second.Cert.SerialNumber.String() {
		t.Errorf("a broken replacement replaced the certificate in force")
	}
	// Something else in the directory changes: the same broken pair is
	// not reported again.
	write(t, dir, "unrelated", []byte("x"))
	time.Sleep(3 * debounce)
	if n := strings.Count(log.String(), "is not PEM"); n != 1 {
		t.Errorf("the broken pair was reported %d times:\n%s", n, log.String())
	}

	third := certstest.Issue(t, ca, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	replace(t, keyFile, third.KeyPEM)
	replace(t, certFile, third.CertPEM)
	waitFor(t, "the repair", func() bool { return serial() == third.Cert.SerialNumber.String() })

	// Through a TLS listener: the handshake presents it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln := src.Listen(ln)
	defer tln.Close()
	go func() {
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = c.Read(make([]byte, 1)); c.Close() }()
		}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	st := c.ConnectionState()
	c.Close()
	if st.PeerCertificates[0].SerialNumber.Cmp(third.Cert.SerialNumber) != 0 || st.NegotiatedProtocol != "h2" {
		t.Errorf("the handshake presented %v over %q", st.PeerCertificates[0].SerialNumber, st.NegotiatedProtocol)
	}

	// Closing the listener ends the watching.
	_ = tln.Close()
	replace(t, certFile, first.CertPEM)
	replace(t, keyFile, first.KeyPEM)
	time.Sleep(3 * debounce)
	if serial() != third.Cert.SerialNumber.String() {
		t.Error("a closed source still reloads")
	}
}

// TestPlainHTTPToTheTLSListener: a client speaking plain HTTP is told so.
func TestPlainHTTPToTheTLSListener(t *testing.T) {
	t.Parallel()
	_, leaf := certstest.PKI(t)
	cert, err := ParsePair(leaf.CertPEM, leaf.KeyPEM, "c", "k", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln := Fixed(cert).Listen(ln)
	defer tln.Close()
	go func() {
		c, err := tln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Read(make([]byte, 10))
		c.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, _ := c.Read(buf)
	if got := string(buf[:n]); !strings.HasPrefix(got, "HTTP/1.0 400 Bad Request\r\n") || !strings.Contains(got, "use an https:// URL") {
		t.Errorf("got %q", got)
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		host  string
		extra []string
		want  string
	}{
		{"127.0.0.1", nil, "127.0.0.1 ::1 localhost"},
		{"0.0.0.0", nil, "127.0.0.1 ::1 localhost"},
		{"::", []string{"Doppel.Example.COM."}, "127.0.0.1 ::1 doppel.example.com localhost"},
		{"10.1.2.3", []string{"[fd00::1]", "10.1.2.3"}, "10.1.2.3 fd00::1"},
		{"::ffff:10.1.2.3", nil, "10.1.2.3"},
		{"localhost", nil, "127.0.0.1 ::1 localhost"},
	} {
		if got := strings.Join(Names(c.host, c.extra...), " "); got != c.want {
			t.Errorf("Names(%q, %q) = %q, want %q", c.host, c.extra, got, c.want)
		}
	}
}
