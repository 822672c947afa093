package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// The Toxiproxy API's bounds through the binary (SPEC §18.4), driven by
// Toxiproxy's own Go client: what a client may make, where its proxies
// may listen, and what they may relay to.

// wantHTTPError fails unless err is Toxiproxy's client's error for an
// answer of that status whose message has want in it.
func wantHTTPError(t *testing.T, what string, err error, status int, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("HTTP %d: ", status)) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v; want HTTP %d with %q", what, err, status, want)
	}
}

func TestToxiproxyAPIIsBounded(t *testing.T) {
	t.Parallel()
	tcpListen := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	doc := fmt.Sprintf("proxies:\n  - name: db\n    type: tcp\n    listen: %s\n    upstream: 127.0.0.1:9\n", tcpListen)
	p, cl, api, proxyAddr := toxiproxyDoppelWith(t, "127.0.0.1", "", doc)
	up := tcpEcho(t)

	// Names.
	_, err := cl.CreateProxy("a b", "127.0.0.1:0", up)
	wantHTTPError(t, "a name with a space", err, 400, `bad request body: name "a b" is not 1 to 255 characters of A-Z, a-z, 0-9`)
	_, err = cl.CreateProxy(strings.Repeat("n", 256), "127.0.0.1:0", up)
	wantHTTPError(t, "a name of 256 characters", err, 400, "bad request body: name ")
	px, err := cl.CreateProxy(strings.Repeat("n", 255), "127.0.0.1:0", up)
	if err != nil {
		t.Fatalf("a name of 255 characters: %v", err)
	}
	_, err = px.AddToxic("a/b", "latency", "", 1, toxiproxy.Attributes{"latency": 1})
	wantHTTPError(t, "a toxic name with a slash", err, 400, "bad request body: name ")

	// Toxics: 100 on a proxy.
	for i := range 100 {
		if _, err := px.AddToxic("t"+strconv.Itoa(i), "latency", "", 1, toxiproxy.Attributes{"latency": 1}); err != nil {
			t.Fatalf("toxic %d: %v", i+1, err)
		}
	}
	_, err = px.AddToxic("one-more", "latency", "", 1, nil)
	wantHTTPError(t, "the 101st toxic", err, 400, "too many toxics on a proxy: at most 100")

	// Proxies: 1,000, the one made and a list of 1,000 more refused.
	var list strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&list, `,{"name":"p%d","listen":"127.0.0.1:0","upstream":"127.0.0.1:1"}`, i)
	}
	r, err := http.Post("http://"+api+"/populate", "application/json", strings.NewReader("["+list.String()[1:]+"]"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 400 || !strings.Contains(string(body), `{"error":"too many proxies: at most 1000","status":400,"proxies":null}`) {
		t.Errorf("1,001 proxies: %d %s", r.StatusCode, body)
	}
	if all, err := cl.Proxies(); err != nil || len(all) != 1 || len(all[px.Name].ActiveToxics) != 100 {
		t.Fatalf("after the refusals: %v, %d proxies", err, len(all))
	}

	// Bodies: 64 KiB.
	r, err = http.Post("http://"+api+"/proxies", "application/json", strings.NewReader(`{"name":"big","listen":"127.0.0.1:0","upstream":"`+up+`"}`+strings.Repeat(" ", 64<<10)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 413 || !strings.Contains(string(body), `"status":413`) || !strings.Contains(string(body), "more than 65536 bytes") {
		t.Errorf("a body past 64 KiB: %d %s", r.StatusCode, body)
	}

	// Where a proxy listens: loopback, not every interface.
	_, err = cl.CreateProxy("wide", "0.0.0.0:0", up)
	wantHTTPError(t, "listen 0.0.0.0", err, 400, `bad request body: listen "0.0.0.0:0" is not a loopback address nor toxiproxy.host (127.0.0.1): a proxy listens elsewhere only where toxiproxy.allow_listen names the address`)

	// What it relays to: none of Doppel's own listeners.
	admin := adminAddrOf(t, p)
	_, adminPort, _ := net.SplitHostPort(admin)
	for _, c := range []struct{ upstream, want string }{
		{admin, "is Doppel's own admin API (" + admin + ")"},
		{"localhost:" + adminPort, "is Doppel's own admin API"},
		{proxyAddr, "is Doppel's own proxy listener"},
		{api, "is Doppel's own Toxiproxy API"},
		{tcpListen, `is Doppel's own tcp proxy "db"`},
		{px.Listen, `is Doppel's own Toxiproxy proxy "` + px.Name + `"`},
	} {
		_, err := cl.CreateProxy("relay", "127.0.0.1:0", c.upstream)
		wantHTTPError(t, "upstream "+c.upstream, err, 400, c.want)
	}
	relay, err := cl.CreateProxy("relay", "127.0.0.1:0", up)
	if err != nil {
		t.Fatal(err)
	}
	relay.Upstream = admin
	wantHTTPError(t, "an update to the admin API", relay.Save(), 400, "is Doppel's own admin API")
	echoBack(t, tcpDial(t, relay.Listen), []byte("still relays to the echo"))

	// A browser, whatever the case of its user agent.
	for _, ua := range []string{"Mozilla/5.0", "mozilla/5.0 (X11; Linux x86_64)", "MOZILLA/5.0"} {
		req, _ := http.NewRequest("POST", "http://"+api+"/reset", nil)
		req.Header.Set("User-Agent", ua)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 403 {
			t.Errorf("user agent %q: %d, want 403", ua, r.StatusCode)
		}
	}
}

// With the API on every interface, as a container binds it for
// Testcontainers, its proxies listen there too; elsewhere only where
// allow_listen says.
func TestToxiproxyProxiesListenOnTheAPIsHostOrWhereAllowed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, host, section string }{
		{"the API on 0.0.0.0", "0.0.0.0", ""},
		{"allow_listen", "127.0.0.1", ", allow_listen: [0.0.0.0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, cl, _, _ := toxiproxyDoppelWith(t, c.host, c.section, "")
			up := tcpEcho(t)
			px, err := cl.CreateProxy("redis", "0.0.0.0:0", up)
			if err != nil {
				t.Fatal(err)
			}
			_, port, _ := net.SplitHostPort(px.Listen)
			echoBack(t, tcpDial(t, "127.0.0.1:"+port), []byte("ping"))
			_, err = cl.CreateProxy("v6", "[::]:0", up)
			wantHTTPError(t, "listen [::] where only 0.0.0.0 is allowed", err, 400, "toxiproxy.allow_listen")
		})
	}
}
