package main

// TLS on the proxy listener (SPEC §17.7), through the binary: a pair of
// files, read again when they change; refused input; a certificate under
// Doppel's own CA, kept across restarts; and upstreams over https
// speaking HTTP/2. Test certificates come from certstest.

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/certs/certstest"
)

// tlsConfig writes serveConfig's document with tls under server.
func tlsConfig(t testing.TB, dir, tls, body string) string {
	t.Helper()
	cfg := serveConfig(t, dir, 0, 0, body)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(b), "server:\n", "server:\n  tls: "+tls+"\n", 1)
	return writeFile(t, dir, "main.yaml", doc)
}

// httpsClient trusts roots and speaks HTTP/2 when the server offers it,
// or HTTP/1.1 alone with h1.
func httpsClient(roots *x509.CertPool, h1 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, Proxy: nil, ForceAttemptHTTP2: true}
	if h1 {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetHTTP1(true)
	}
	return &http.Client{
		Timeout:       20 * time.Second,
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// presented is the serial of the certificate a handshake with addr
// presents, verified against roots for serverName.
func presented(addr, serverName string, roots *x509.CertPool) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: serverName})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

// seen records what the upstream saw of each request, by path.
type seen struct {
	mu    sync.Mutex
	proto map[string]string // X-Forwarded-Proto
}

func (s *seen) get(path string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proto[path]
}

// TestTLSCertAndKey: with server.tls {cert, key}, a client trusting the
// CA gets its answer over https in HTTP/2, or HTTP/1.1 when that is all it
// speaks; the upstream sees X-Forwarded-Proto: https, also on a
// connection handed back after a delayed (parked) answer; a redirect to
// the upstream comes back as an https Doppel URL; an abort cuts the
// connection beneath TLS; plain HTTP to the port is told to use https.
func TestTLSCertAndKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, leaf := certstest.PKI(t)
	certFile, keyFile := leaf.Files(t, dir)
	s := &seen{proto: map[string]string{}}
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.proto[r.URL.Path] = r.Header.Get("X-Forwarded-Proto")
		s.mu.Unlock()
		if r.URL.Path == "/go" {
			http.Redirect(w, r, "/next?x=1", http.StatusFound)
			return
		}
		w.Header().Set("Content-Length", "2")
		_, _ = io.WriteString(w, "ok")
	})
	body := "proxies:\n" + proxyYAML("slow", up.URL, "X-Slow") + "    latency: {percentage: 1, min: 0.2, max: 0.2}\n" +
		proxyYAML("close", up.URL, "X-Close") + "    abort: {percentage: 1, at: body, after: 1, how: close}\n" +
		proxyYAML("reset", up.URL, "X-Reset") + "    abort: {percentage: 1, at: request, how: reset}\n" +
		proxyYAML("api", up.URL, "")
	cfg := tlsConfig(t, dir, fmt.Sprintf("{cert: %q, key: %q}", certFile, keyFile), body)
	p, addr := serveUp(t, cfg, nil)
	p.waitLine("the TLS line", startTimeout, func(l string) bool {
		return strings.Contains(lineMsg(l), "the proxy listener serves TLS") && lineField(l, "cert") == certFile
	})
	base := "https://" + addr

	res, err := httpsClient(ca.Pool(), false).Get(base + "/h2")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.ProtoMajor != 2 {
		t.Errorf("HTTP/2 client: %d over %s", res.StatusCode, res.Proto)
	}
	if got := s.get("/h2"); got != "https" {
		t.Errorf("over HTTP/2 the upstream saw X-Forwarded-Proto %q", got)
	}

	h1 := httpsClient(ca.Pool(), true)
	res, err = h1.Get(base + "/go")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.ProtoMajor != 1 || res.StatusCode != http.StatusFound || res.Header.Get("Location") != base+"/next?x=1" {
		t.Errorf("HTTP/1.1 client: %d over %s, Location %q, want %s/next?x=1", res.StatusCode, res.Proto, res.Header.Get("Location"), base)
	}

	// A delayed answer is parked and its connection handed back: the
	// next request on it is forwarded as https too.
	var reused []bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
	for _, path := range []string{"/parked", "/after"} {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("X-Slow", "slow")
		res, err := h1.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || string(b) != "ok" {
			t.Errorf("%s: %d %q", path, res.StatusCode, b)
		}
		if got := s.get(path); got != "https" {
			t.Errorf("%s: the upstream saw X-Forwarded-Proto %q", path, got)
		}
	}
	if len(reused) != 2 || !reused[1] {
		t.Errorf("the second request did not reuse the handed-back connection: %v", reused)
	}

	// Cuts reach the TCP connection beneath TLS: a FIN after one byte of
	// body, a reset before any answer.
	req, _ := http.NewRequest(http.MethodGet, base+"/cut", nil)
	req.Header.Set("X-Close", "close")
	res, err = h1.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "o" || err != io.ErrUnexpectedEOF {
		t.Errorf("abort at body after 1 byte: %q, %v", b, err)
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/cut", nil)
	req.Header.Set("X-Reset", "reset")
	if res, err := h1.Do(req); err == nil || !strings.Contains(err.Error(), "reset") {
		if err == nil {
			res.Body.Close()
		}
		t.Errorf("abort at request with how: reset: %v, want a reset connection", err)
	}

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	plain, _ := io.ReadAll(c)
	if !bytes.HasPrefix(plain, []byte("HTTP/1.0 400 Bad Request")) || !bytes.Contains(plain, []byte("use an https:// URL")) {
		t.Errorf("plain HTTP to the TLS listener got %q", plain)
	}
}

// TestTLSReload: the files replaced while serving (a new certificate, a
// new serial) are presented by new handshakes within seconds, without a
// restart; a broken replacement is logged with its path and the last good
// certificate keeps serving.
func TestTLSReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, first := certstest.PKI(t)
	certFile, keyFile := first.Files(t, dir)
	cfg := tlsConfig(t, dir, fmt.Sprintf("{cert: %q, key: %q}", certFile, keyFile), "")
	p, addr := serveUp(t, cfg, nil)
	serial := func() string {
		c, err := presented(addr, "127.0.0.1", ca.Pool())
		if err != nil {
			t.Fatalf("handshake: %v\n%s", err, p)
		}
		return c.SerialNumber.String()
	}
	if got := serial(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("serving %s, want the first certificate %s", got, first.Cert.SerialNumber)
	}

	second := certstest.Issue(t, ca, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	// Written as tools do: new files renamed over the old ones.
	for _, f := range []struct {
		path string
		b    []byte
	}{{keyFile, second.KeyPEM}, {certFile, second.CertPEM}} {
		tmp := writeFile(t, dir, filepath.Base(f.path)+".tmp", string(f.b))
		if err := os.Rename(tmp, f.path); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for serial() != second.Cert.SerialNumber.String() {
		if time.Now().After(deadline) {
			t.Fatalf("the new certificate is not presented 5 s after the files changed:\n%s", p)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.waitLine("the reload line", startTimeout, func(l string) bool {
		return strings.Contains(lineMsg(l), "new handshakes present it") && lineField(l, "serial") == fmt.Sprintf("%x", second.Cert.SerialNumber)
	})

	// In place this time, and broken.
	if err := os.WriteFile(certFile, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitLine("the refusal", startTimeout, func(l string) bool {
		return strings.Contains(lineMsg(l), certFile+": is not PEM") && strings.Contains(lineMsg(l), "the previous one stays in force")
	})
	if got := serial(); got != second.Cert.SerialNumber.String() {
		t.Errorf("after a broken replacement the listener presents %s, want %s", got, second.Cert.SerialNumber)
	}
	if p.hasExited() {
		t.Fatalf("doppel exited:\n%s", p)
	}
}

// TestTLSRefusesBadInput: a key that is not the certificate's, a missing
// file, a file that is not PEM and an expired certificate each stop serve
// with exit 1 and a message naming the file.
func TestTLSRefusesBadInput(t *testing.T) {
	t.Parallel()
	ca, leaf := certstest.PKI(t)
	_, other := certstest.PKI(t)
	expired := certstest.Issue(t, ca, time.Now().Add(-72*time.Hour), time.Now().Add(-24*time.Hour))
	for _, c := range []struct {
		name      string
		cert, key []byte // nil: the file is missing
		blame     string // cert or key
		says      string
	}{
		{"mismatched key", leaf.CertPEM, other.KeyPEM, "key", "the key does not match the certificate in"},
		{"missing file", leaf.CertPEM, nil, "key", "cannot be read: no such file or directory"},
		{"not PEM", []byte("this is not PEM\n"), leaf.KeyPEM, "cert", "is not PEM"},
		{"expired", expired.CertPEM, expired.KeyPEM, "cert", "the certificate expired on " + expired.Cert.NotAfter.UTC().Format("2006-01-02")},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			paths := map[string]string{"cert": filepath.Join(dir, "cert.pem"), "key": filepath.Join(dir, "key.pem")}
			for what, b := range map[string][]byte{"cert": c.cert, "key": c.key} {
				if b != nil {
					writeFile(t, dir, what+".pem", string(b))
				}
			}
			cfg := tlsConfig(t, dir, fmt.Sprintf("{cert: %q, key: %q}", paths["cert"], paths["key"]), "")
			p := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
			// Exits, or is seen serving (and killed when the test ends).
			deadline := time.Now().Add(startTimeout)
			for !p.hasExited() && !strings.Contains(p.stdout(), msgServing) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if !p.hasExited() {
				t.Fatalf("want exit 1, and it serves:\n%s", p)
			}
			if p.code != wantRejected {
				t.Fatalf("want exit 1:\n%s", p)
			}
			if want := "server.tls: " + paths[c.blame] + ": "; !strings.Contains(p.stderr.String(), want) || !strings.Contains(p.stderr.String(), c.says) {
				t.Errorf("stderr should say %q ...%s...:\n%s", want, c.says, p)
			}
		})
	}
}

// TestTLSAuto: the first start makes a CA and a certificate, writes the
// CA certificate (no key) to ca_file beside the configuration and says
// where; a client trusting ca_file verifies the listener as 127.0.0.1 and
// as localhost; the keys are 0600 in a 0700 state directory; a restart
// serves the same CA and the same certificate, and one reached by another
// name (DOPPEL_EXTERNAL_URL) a certificate for it under the same CA.
func TestTLSAuto(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get("X-Forwarded-Proto"))
	})
	cfg := tlsConfig(t, dir, "{auto: true}", "proxies:\n"+proxyYAML("api", up.URL, ""))
	caFile, state := filepath.Join(dir, "doppel-ca.pem"), filepath.Join(dir, ".doppel-tls")

	start := func(env map[string]string) (*proc, string, *x509.CertPool, *x509.Certificate) {
		p, addr := serveUp(t, cfg, env)
		p.waitLine("the CA's path", startTimeout, func(l string) bool { return lineField(l, "ca_file") == caFile })
		caPEM, err := os.ReadFile(caFile)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(caPEM, []byte("PRIVATE KEY")) || bytes.Count(caPEM, []byte("BEGIN CERTIFICATE")) != 1 {
			t.Fatalf("ca_file holds more than the CA's certificate:\n%s", caPEM)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(caPEM)
		var leaf *x509.Certificate
		for _, name := range []string{"127.0.0.1", "localhost"} {
			c, err := presented(addr, name, roots)
			if err != nil {
				t.Fatalf("a handshake for %s trusting ca_file: %v\n%s", name, err, p)
			}
			leaf = c
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost"}); err != nil {
			t.Errorf("the certificate does not verify against ca_file: %v", err)
		}
		return p, addr, roots, leaf
	}

	p, addr, roots, leaf := start(nil)
	res := mustGet(t, httpsClient(roots, false), "https://"+addr+"/", nil)
	if res.status != http.StatusOK || string(res.body) != "https" {
		t.Errorf("through auto's certificate: %d %q", res.status, res.body)
	}
	for name, want := range map[string]os.FileMode{"": 0o700, "ca-key.pem": 0o600, "key.pem": 0o600} {
		path := filepath.Join(state, name)
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v (%v), want mode %04o", path, st.Mode().Perm(), err, want)
		}
		if b, _ := os.ReadFile(path); name != "" && !bytes.Contains(b, []byte("PRIVATE KEY")) {
			t.Errorf("%s holds no key", path)
		}
	}
	caBefore, _ := os.ReadFile(caFile)
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("exit %d:\n%s", code, p)
	}

	p, _, _, again := start(nil)
	caAfter, _ := os.ReadFile(caFile)
	if !bytes.Equal(caBefore, caAfter) {
		t.Error("a restart made a new CA")
	}
	if again.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Errorf("a restart made a new certificate: serial %x, was %x", again.SerialNumber, leaf.SerialNumber)
	}
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("exit %d:\n%s", code, p)
	}

	// Reached by another name: a new certificate naming it, and a new CA,
	// since the CA is constrained to the names it was made for; the log
	// says clients must trust the new ca_file.
	p, addr, roots, _ = start(map[string]string{"DOPPEL_EXTERNAL_URL": "https://doppel.test:8443/"})
	if _, err := presented(addr, "doppel.test", roots); err != nil {
		t.Errorf("a handshake for the external URL's host: %v\n%s", err, p)
	}
	if caNow, _ := os.ReadFile(caFile); bytes.Equal(caBefore, caNow) || !strings.Contains(p.stdout(), "clients must trust the new ca_file "+caFile) {
		t.Errorf("a name outside the CA's constraints kept the CA, or said nothing:\n%s", p)
	}
}

// TestTLSUpstreamHTTP2: an upstream over https that offers HTTP/2 is
// reached in HTTP/2, trusted through SSL_CERT_FILE.
func TestTLSUpstreamHTTP2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%d", r.ProtoMajor)
	}))
	up.EnableHTTP2 = true
	up.StartTLS()
	t.Cleanup(up.Close)
	roots := writeFile(t, dir, "upstream-ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw})))
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("api", up.URL, ""))
	_, addr := serveUp(t, cfg, map[string]string{"SSL_CERT_FILE": roots})
	res := mustGet(t, newClient(), "http://"+addr+"/", nil)
	if res.status != http.StatusOK || string(res.body) != "2" {
		t.Errorf("the upstream answered %d %q; want 200 over HTTP/2", res.status, res.body)
	}
}
