package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

// namedUpstream serves h as http://api.example.test:<port>: a transport
// that dials the test server whatever the host, so addresses in bodies can
// be told apart by name (cdn.api.example.test, api.example.test.evil.test).
func namedUpstream(t *testing.T, h http.HandlerFunc) (base string, transport *http.Transport) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	transport = NewTransport()
	transport.Proxy = nil
	transport.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	return "http://api.example.test:" + port, transport
}

func startRewriting(t *testing.T, src string, transport http.RoundTripper, external string) *httptest.Server {
	t.Helper()
	doc, err := config.Load([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := runtime.Compile(doc)
	opts := Options{Transport: transport, Log: telemetry.Nop()}
	if external != "" {
		e, err := NewExternal(external)
		if err != nil {
			t.Fatal(err)
		}
		opts.External = e
	}
	srv := httptest.NewServer(New(runtime.NewHolder(rt), opts))
	t.Cleanup(srv.Close)
	return srv
}

func TestLocationRewriting(t *testing.T) {
	var base string
	up, transport := namedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", strings.ReplaceAll(r.URL.Query().Get("to"), "UP", base))
		w.WriteHeader(http.StatusFound)
	})
	base = up
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up, "http://"))
	cases := []struct{ to, want string }{
		{"UP/v2/orders/7?x=1&y=%20#frag", "http://doppel.test:9000/pre/orders/7?x=1&y=%20#frag"},
		{"UP/v2/", "http://doppel.test:9000/pre/"},
		{"UP/v2", "http://doppel.test:9000/pre"},
		{"UP/login", "http://doppel.test:9000/pre/login"},
		{"UP", "http://doppel.test:9000/pre"},
		{"/login?next=/v2/", "http://doppel.test:9000/pre/login?next=/v2/"},
		{"/v2/a%2Fb", "http://doppel.test:9000/pre/a%2Fb"},
		{"7", "http://doppel.test:9000/pre/orders/7"},
		{"../x", "http://doppel.test:9000/pre/x"},
		{"http://API.Example.test:" + port + "/v2/z", "http://doppel.test:9000/pre/z"},
		{"//api.example.test:" + port + "/v2/q", "http://doppel.test:9000/pre/q"},
		{"https://elsewhere.example/v2/x", "https://elsewhere.example/v2/x"},
		{"http://cdn.api.example.test:" + port + "/v2/x", "http://cdn.api.example.test:" + port + "/v2/x"},
		{"http://api.example.test:1/v2/x", "http://api.example.test:1/v2/x"},
		{"mailto:someone@example.test", "mailto:someone@example.test"},
	}
	d := startRewriting(t, oneProxy(up+"/v2", ""), transport, "http://doppel.test:9000/pre")
	for _, c := range cases {
		t.Run(c.to, func(t *testing.T) {
			res, _ := get(t, d.URL+"/orders/?to="+url.QueryEscape(c.to), nil)
			if got := res.Header.Get("Location"); got != c.want {
				t.Fatalf("Location %q, want %q", got, c.want)
			}
		})
	}
	t.Run("rewrite_redirects: false relays byte for byte", func(t *testing.T) {
		off := startRewriting(t, oneProxy(up+"/v2", "rewrite_redirects: false"), transport, "http://doppel.test:9000/pre")
		to := "UP/v2/orders/7?b=%41#f"
		res, _ := get(t, off.URL+"/orders/?to="+url.QueryEscape(to), nil)
		if got := res.Header.Get("Location"); got != up+"/v2/orders/7?b=%41#f" {
			t.Fatalf("Location %q", got)
		}
	})
}

func TestBodyRewriting(t *testing.T) {
	var up string
	page := func() string {
		host := strings.TrimPrefix(up, "http://")
		return `<a href="` + up + `/v2/docs?p=1">docs</a> ` +
			`<a href='` + up + `/login'>login</a> ` +
			`<img src="http://cdn.` + host + `/v2/logo.png"> ` +
			`<a href="http://api.example.test.evil.test/v2/x">evil</a> ` +
			`<a href="http://` + strings.Replace(host, "api.example.test", "api.example.test.evil.test", 1) + `/v2/x">evil2</a> ` +
			`HTTP://API.EXAMPLE.TEST:` + strings.Split(host, ":")[1] + `/v2/upper ` +
			`myhttp://` + host + `/v2/not-a-url ` +
			up + `/v2`
	}
	want := func() string {
		host := strings.TrimPrefix(up, "http://")
		return `<a href="http://doppel.test:9000/pre/docs?p=1">docs</a> ` +
			`<a href='http://doppel.test:9000/pre/login'>login</a> ` +
			`<img src="http://cdn.` + host + `/v2/logo.png"> ` +
			`<a href="http://api.example.test.evil.test/v2/x">evil</a> ` +
			`<a href="http://` + strings.Replace(host, "api.example.test", "api.example.test.evil.test", 1) + `/v2/x">evil2</a> ` +
			`http://doppel.test:9000/pre/upper ` +
			`myhttp://` + host + `/v2/not-a-url ` +
			`http://doppel.test:9000/pre`
	}
	var ctype, encoding string
	var body string
	up, transport := namedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		if encoding != "" {
			w.Header().Set("Content-Encoding", encoding)
		}
		w.Header().Set("ETag", `"abc"`)
		w.Header().Set("Digest", "sha-256=xyz")
		w.Header().Set("Content-Md5", "xyz")
		w.Header().Set("Repr-Digest", "sha-256=:xyz:")
		fmt.Fprint(w, body)
	})
	d := startRewriting(t, oneProxy(up+"/v2/", "body_limit: 4Ki"), transport, "http://doppel.test:9000/pre/")

	for _, ct := range []string{"text/html; charset=utf-8", "application/json", "application/javascript", "application/xml", "application/problem+json", "application/atom+xml", "text/plain"} {
		t.Run(ct, func(t *testing.T) {
			ctype, encoding, body = ct, "", page()
			res, got := get(t, d.URL+"/page", nil)
			if string(got) != want() {
				t.Fatalf("got\n%s\nwant\n%s", got, want())
			}
			if res.ContentLength != int64(len(want())) {
				t.Errorf("Content-Length %d, want %d", res.ContentLength, len(want()))
			}
			for _, h := range []string{"Etag", "Digest", "Content-Md5", "Repr-Digest"} {
				if res.Header.Get(h) != "" {
					t.Errorf("%s survived a rewrite", h)
				}
			}
		})
	}
	untouched := []struct{ name, ctype, encoding string }{
		{"binary type", "application/octet-stream", ""},
		{"image", "image/svg", ""},
		{"encoded", "text/html", "gzip"},
		{"no type", "", ""},
	}
	for _, c := range untouched {
		t.Run(c.name, func(t *testing.T) {
			ctype, encoding, body = c.ctype, c.encoding, page()
			res, got := get(t, d.URL+"/page", nil)
			if string(got) != page() || res.Header.Get("Etag") != `"abc"` {
				t.Fatalf("a body that must pass untouched was changed: %s", got)
			}
		})
	}
	t.Run("over body_limit passes wholly unmodified", func(t *testing.T) {
		ctype, encoding = "text/html", ""
		body = page() + strings.Repeat(" "+up+"/v2/x", 500)
		_, got := get(t, d.URL+"/page", nil)
		if string(got) != body {
			t.Fatal("a body over body_limit was modified or cut")
		}
	})
	t.Run("unchanged body keeps its validators", func(t *testing.T) {
		ctype, encoding, body = "text/html", "", "nothing to see"
		res, got := get(t, d.URL+"/page", nil)
		if string(got) != body || res.Header.Get("Etag") != `"abc"` {
			t.Fatalf("%s %v", got, res.Header)
		}
	})
	t.Run("rewrite_urls: false relays the upstream's bytes", func(t *testing.T) {
		off := startRewriting(t, oneProxy(up+"/v2/", "rewrite_urls: false"), transport, "http://doppel.test:9000/pre/")
		ctype, encoding, body = "text/html", "", page()
		res, got := get(t, off.URL+"/page", nil)
		if string(got) != page() || res.Header.Get("Etag") != `"abc"` {
			t.Fatal("rewrite_urls: false changed the body")
		}
	})
}

func TestExternalAddress(t *testing.T) {
	var up string
	up, transport := namedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", up+"/next")
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusFound)
		fmt.Fprint(w, up+"/body")
	})
	t.Run("template over the system variables", func(t *testing.T) {
		d := startRewriting(t, oneProxy(up, ""), transport, "https://{{ host }}/via/{{ proxy_name }}")
		res, body := get(t, d.URL+"/", nil)
		host := strings.TrimPrefix(d.URL, "http://")
		if res.Header.Get("Location") != "https://"+host+"/via/zeta/next" || string(body) != "https://"+host+"/via/zeta/body" {
			t.Fatalf("Location %q, body %q", res.Header.Get("Location"), body)
		}
	})
	t.Run("a failing template means no rewriting, never a 500", func(t *testing.T) {
		d := startRewriting(t, oneProxy(up, ""), transport, "http://{{ nope }}/")
		res, body := get(t, d.URL+"/", nil)
		if res.StatusCode != http.StatusFound || res.Header.Get("Location") != up+"/next" || string(body) != up+"/body" {
			t.Fatalf("%d %q %q", res.StatusCode, res.Header.Get("Location"), body)
		}
	})
	t.Run("the listener's address, wildcards read as loopback", func(t *testing.T) {
		for addr, want := range map[string]string{
			"0.0.0.0:8080":   "http://127.0.0.1:8080/",
			"[::]:8080":      "http://[::1]:8080/",
			"10.1.2.3:81":    "http://10.1.2.3:81/",
			"127.0.0.1:9000": "http://127.0.0.1:9000/",
		} {
			if got := ListenerExternal("http", addr).String(); got != want {
				t.Errorf("%s: %s, want %s", addr, got, want)
			}
		}
		// A TLS listener's own address is https.
		if got := ListenerExternal("https", "0.0.0.0:8443").String(); got != "https://127.0.0.1:8443/" {
			t.Errorf("over TLS: %s", got)
		}
	})
	t.Run("no address, no rewriting", func(t *testing.T) {
		d := startRewriting(t, oneProxy(up, ""), transport, "")
		res, _ := get(t, d.URL+"/", nil)
		if res.Header.Get("Location") != up+"/next" {
			t.Fatal("rewrote without an address")
		}
	})
}

// BenchmarkRewriteBody measures the body scan on a 1 MiB HTML page with an
// upstream address every ~2 KiB.
//
//	go test ./internal/proxy -run '^$' -bench RewriteBody
func BenchmarkRewriteBody(b *testing.B) {
	upstream, _ := url.Parse("http://api.example.test:8080/v2/")
	own, _ := url.Parse("http://127.0.0.1:9000/")
	rw := &rewriter{authority: authorityOf("http", upstream.Host), short: len(upstream.Hostname()), base: "/v2/", own: own}
	var page bytes.Buffer
	for page.Len() < 1<<20 {
		page.WriteString(`<p>` + strings.Repeat("lorem ipsum dolor sit amet ", 70) + `<a href="http://api.example.test:8080/v2/item/42">x</a> <a href="https://cdn.example.test/x">y</a></p>`)
	}
	src := page.Bytes()
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, changed := rw.body(src); !changed {
			b.Fatal("nothing rewritten")
		}
	}
}

// BenchmarkRewriteJSON is what reading a small JSON answer for the
// upstream's address costs, as every JSON answer is read by default: one
// that names no such address and goes on as it came, and one that names
// it once and goes on rewritten.
//
//	go test ./internal/proxy -run '^$' -bench RewriteJSON -benchmem
func BenchmarkRewriteJSON(b *testing.B) {
	upstream, _ := url.Parse("http://api.example.test:8080/v2/")
	own, _ := url.Parse("http://127.0.0.1:9000/")
	rw := &rewriter{authority: authorityOf("http", upstream.Host), short: len(upstream.Hostname()), base: "/v2/", own: own}
	for _, c := range []struct {
		name, body string
		changed    bool
	}{
		{"unchanged", `{"id": 42, "name": "item 42", "tags": ["a", "b"], "next": "https://cdn.example.test/items/43", "price": 12.5}`, false},
		{"rewritten", `{"id": 42, "name": "item 42", "tags": ["a", "b"], "next": "http://api.example.test:8080/v2/items/43", "price": 12.5}`, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			src := []byte(c.body)
			body := &replayBody{}
			res := &http.Response{Header: http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(src))}}}
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				body.Reset(src)
				res.Body, res.ContentLength = body, int64(len(src))
				if err := rw.rewriteBody(res, 1<<20); err != nil {
					b.Fatal(err)
				}
				if changed := res.ContentLength != int64(len(src)); changed != c.changed {
					b.Fatalf("changed: %v", changed)
				}
			}
		})
	}
}

// replayBody serves the same bytes again after each Reset, without an
// allocation of its own in the measurement.
type replayBody struct{ bytes.Reader }

func (*replayBody) Close() error { return nil }

// TestNamesIsTheComparison holds the body's shortcut to the comparison
// the redirects make, for hostports that are, nearly are, and are not the
// upstream's authority.
func TestNamesIsTheComparison(t *testing.T) {
	for _, authority := range []string{"api.example.test:8080", "api.example.test:80", "127.0.0.1:443", "[::1]:8080", "x:1"} {
		host := authority[:strings.LastIndexByte(authority, ':')]
		hostports := []string{
			authority, strings.ToUpper(authority), host, strings.ToUpper(host), strings.Trim(host, "[]"),
			"[" + host + "]", "[" + host + "]:8080", host + ":", host + ":08080", host + ":8081",
			"cdn." + authority, "a" + host, host + "a", "api.example.tesT:8080", "API.EXAMPLE.TEST",
			"", ":", "[]", "]" + host, host + "]:8080", "x:1", "X:1", "x", "[x]:1",
		}
		for _, scheme := range []string{"http", "https"} {
			rw := &rewriter{authority: authority}
			for _, hp := range hostports {
				if got, want := rw.names(scheme, []byte(hp)), authorityOf(scheme, hp) == authority; got != want {
					t.Errorf("authority %s, %s://%s: names says %v, the comparison %v", authority, scheme, hp, got, want)
				}
			}
		}
	}
}

func FuzzNames(f *testing.F) {
	f.Add("api.example.test:8080", "API.example.test:8080", true)
	f.Add("api.example.test:80", "api.example.test", false)
	f.Add("[::1]:8080", "[::1]:8080", true)
	f.Fuzz(func(t *testing.T, upstream, hostport string, https bool) {
		scheme := "http"
		if https {
			scheme = "https"
		}
		for i := 0; i < len(hostport); i++ {
			if !isAuthorityByte(hostport[i]) {
				return // the body's scan reads no other byte into a hostport
			}
		}
		rw := &rewriter{authority: authorityOf(scheme, upstream)}
		if got, want := rw.names(scheme, []byte(hostport)), authorityOf(scheme, hostport) == rw.authority; got != want {
			t.Errorf("authority %q, %s://%s: names says %v, the comparison %v", rw.authority, scheme, hostport, got, want)
		}
	})
}

// TestReadPrefixIsReadAll holds readPrefix to what it stands in for, for
// bodies shorter than, as long as and longer than their stated length and
// the limit, read in small pieces, and failing part way.
func TestReadPrefixIsReadAll(t *testing.T) {
	broken := errors.New("broken")
	for _, body := range []string{"", "a", strings.Repeat("x", 511), strings.Repeat("y", 512), strings.Repeat("z", 513), strings.Repeat("w", 3000)} {
		for _, size := range []int64{-1, 0, 1, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 1, 5000} {
			for _, n := range []int64{0, 1, 2, 512, 513, int64(len(body)), int64(len(body)) + 1, 1 << 20} {
				for name, reader := range map[string]func() io.Reader{
					"whole":    func() io.Reader { return strings.NewReader(body) },
					"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
					"data+EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
					"failing":  func() io.Reader { return io.MultiReader(strings.NewReader(body), iotest.ErrReader(broken)) },
				} {
					want, wantErr := io.ReadAll(io.LimitReader(reader(), n))
					got, err := readPrefix(reader(), n, size)
					if !errors.Is(err, wantErr) || !bytes.Equal(got, want) {
						t.Fatalf("%s body of %d, size %d, n %d: %d bytes and %v, want %d and %v", name, len(body), size, n, len(got), err, len(want), wantErr)
					}
				}
			}
		}
	}
}
