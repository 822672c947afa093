package doppeltest_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/doppeltest"
)

// A document with server.tls serves https at ProxyURL; with auto, the CA
// certificate goes where ca_file says.
func TestServerTLSInATest(t *testing.T) {
	t.Parallel()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	s := doppeltest.New(t, doppeltest.Config{YAML: `server: {host: 127.0.0.1, port: 8080, tls: {auto: true, ca_file: ` + caFile + `}}
admin: {host: 127.0.0.1, port: 8081}
proxies: [{name: shop, type: http, url: "http://127.0.0.1:9",
  mocks: [{name: who, request: {method: GET, url: ^/who$}, response: {status: 200, body: over tls}}]}]`})
	if !strings.HasPrefix(s.ProxyURL, "https://127.0.0.1:") {
		t.Fatalf("ProxyURL %s", s.ProxyURL)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	if got := body(t, c, s.ProxyURL+"/who"); got != "over tls" {
		t.Errorf("got %q", got)
	}
}
