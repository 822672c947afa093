package toxiproxy

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestNamesAreBounded(t *testing.T) {
	s := newServer(t)
	long := strings.Repeat("n", MaxName+1)
	for _, name := range []string{"with space", "slash/", "ünï", long, ".", ".."} {
		code, body := call(t, s, "POST", "/proxies", `{"name":"`+name+`","listen":"127.0.0.1:0","upstream":"127.0.0.1:1","enabled":false}`)
		wantError(t, code, body, 400, "bad request body: name ")
		if len(body) > 300 {
			t.Errorf("the message repeats the name whole: %d bytes", len(body))
		}
		code, body = call(t, s, "POST", "/populate", `[{"name":"`+name+`","listen":"127.0.0.1:0","upstream":"127.0.0.1:1","enabled":false}]`)
		wantError(t, code, body, 400, "bad request body: name at proxy 1 ")
	}
	ok := strings.Repeat("a", MaxName-5) + "-_.Z9"
	if code, body := call(t, s, "POST", "/proxies", `{"name":"`+ok+`","listen":"127.0.0.1:0","upstream":"127.0.0.1:1","enabled":false}`); code != 201 {
		t.Fatalf("a name of %d characters: %d %s", MaxName, code, body)
	}
	code, body := call(t, s, "POST", "/proxies/"+ok+"/toxics", `{"name":"`+long+`","type":"latency"}`)
	wantError(t, code, body, 400, "bad request body: name ")
	code, body = call(t, s, "POST", "/proxies/"+ok+"/toxics", `{"name":"a b","type":"latency"}`)
	wantError(t, code, body, 400, "bad request body: name ")
	if code, body := call(t, s, "POST", "/proxies/"+ok+"/toxics", `{"name":"`+ok+`","type":"latency"}`); code != 200 {
		t.Fatalf("a toxic name of %d characters: %d %s", MaxName, code, body)
	}
}

func TestToxicsAreBounded(t *testing.T) {
	s := newServer(t)
	call(t, s, "POST", "/proxies", `{"name":"db","listen":"127.0.0.1:0","upstream":"127.0.0.1:1","enabled":false}`)
	for i := range MaxToxics {
		if code, body := call(t, s, "POST", "/proxies/db/toxics", `{"name":"t`+strconv.Itoa(i)+`","type":"latency"}`); code != 200 {
			t.Fatalf("toxic %d: %d %s", i+1, code, body)
		}
	}
	code, body := call(t, s, "POST", "/proxies/db/toxics", `{"name":"one-more","type":"latency"}`)
	wantError(t, code, body, 400, "too many toxics on a proxy: at most 100")
}

func TestAddressesAreBounded(t *testing.T) {
	s := newServer(t)
	for _, c := range []struct{ listen, upstream, want string }{
		{"127.0.0.1:0", "127.0.0.1", "bad request body: upstream \"127.0.0.1\" is not HOST:PORT"},
		{"127.0.0.1:0", "127.0.0.1:0", "bad request body: upstream \"127.0.0.1:0\": the port is not a number from 1"},
		{"127.0.0.1:0", "db:postgres", "bad request body: upstream \"db:postgres\": the port"},
		{"127.0.0.1:0", ":5432", "bad request body: upstream \":5432\": the host is empty"},
		{"127.0.0.1:0", strings.Repeat("h", 254) + ":1", "bad request body: upstream \"hhhh"},
		{"127.0.0.1:65536", "127.0.0.1:1", "bad request body: listen \"127.0.0.1:65536\": the port"},
		{strings.Repeat("h", 254) + ":0", "127.0.0.1:1", "bad request body: listen \"hhhh"},
	} {
		code, body := call(t, s, "POST", "/proxies", `{"name":"p","listen":"`+c.listen+`","upstream":"`+c.upstream+`"}`)
		wantError(t, code, body, 400, c.want)
	}
}

// listens reports whether a proxy made with listen is made, and stops it.
func listens(t *testing.T, s *Server, listen string) (int, string) {
	t.Helper()
	code, body := call(t, s, "POST", "/proxies", `{"name":"l","listen":"`+listen+`","upstream":"127.0.0.1:1"}`)
	call(t, s, "DELETE", "/proxies/l", "")
	return code, body
}

func TestListenIsLoopbackTheAPIsHostOrAllowed(t *testing.T) {
	loopback := newServer(t)
	for _, l := range []string{"127.0.0.1:0", "127.0.0.2:0", "localhost:0"} {
		if code, body := listens(t, loopback, l); code != 201 {
			t.Errorf("listen %s: %d %s", l, code, body)
		}
	}
	for _, l := range []string{"0.0.0.0:0", "[::]:0", ":0", ""} {
		code, body := listens(t, loopback, l)
		wantError(t, code, body, 400, "bad request body: listen ")
		if !strings.Contains(body, "toxiproxy.allow_listen") {
			t.Errorf("listen %q: the refusal does not say where to allow it: %s", l, body)
		}
	}
	// Neither on update, nor in a list, which ends there: the proxies
	// before are made, as Toxiproxy makes them, none after.
	call(t, loopback, "POST", "/proxies", `{"name":"db","listen":"127.0.0.1:0","upstream":"127.0.0.1:1"}`)
	code, body := call(t, loopback, "POST", "/proxies/db", `{"listen":"0.0.0.0:0"}`)
	wantError(t, code, body, 400, "bad request body: listen ")
	var p proxyJSON
	_, body = call(t, loopback, "GET", "/proxies/db", "")
	if _ = json.Unmarshal([]byte(body), &p); !p.Enabled || !strings.HasPrefix(p.Listen, "127.0.0.1:") {
		t.Errorf("a refused update changed the proxy: %s", body)
	}
	code, body = call(t, loopback, "POST", "/populate", `[{"name":"a","listen":"127.0.0.1:0","upstream":"127.0.0.1:1"},{"name":"b","listen":"0.0.0.0:0","upstream":"127.0.0.1:1"},{"name":"c","listen":"127.0.0.1:0","upstream":"127.0.0.1:1"}]`)
	if code != 400 || !strings.Contains(body, `"error":"bad request body: listen `) || !strings.Contains(body, `"name":"a"`) {
		t.Errorf("a list with a listen refused: %d %s", code, body)
	}
	for name, want := range map[string]int{"a": 200, "b": 404, "c": 404} {
		if code, _ := call(t, loopback, "GET", "/proxies/"+name, ""); code != want {
			t.Errorf("after a list refused at b, GET /proxies/%s is %d, want %d", name, code, want)
		}
	}

	// The API bound to every interface, as in a container: its proxies
	// may listen there too (Go binds 0.0.0.0 as [::], dual-stack).
	container := &Server{Host: netip.MustParseAddr("0.0.0.0")}
	t.Cleanup(container.Close)
	for _, l := range []string{"0.0.0.0:0", "127.0.0.1:0", ":0"} {
		code, body := listens(t, container, l)
		if code != 201 || !strings.Contains(body, `"listen":"[::]:`) && !strings.Contains(body, `"listen":"127.0.0.1:`) {
			t.Errorf("listen %q with the API on 0.0.0.0: %d %s", l, code, body)
		}
	}
	code, body = listens(t, container, "[::]:0")
	wantError(t, code, body, 400, "bad request body: listen ")

	allowed := &Server{Host: netip.MustParseAddr("127.0.0.1"), AllowListen: []netip.Addr{netip.MustParseAddr("::")}}
	t.Cleanup(allowed.Close)
	if code, body := listens(t, allowed, "[::]:0"); code != 201 {
		t.Errorf("listen [::]:0 allowed: %d %s", code, body)
	}
	code, body = listens(t, allowed, "0.0.0.0:0")
	wantError(t, code, body, 400, "bad request body: listen ")
}

func TestAnUpstreamThatIsDoppelsOwnListenerIsRefused(t *testing.T) {
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	every, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer every.Close()
	s := &Server{Own: func() []Listener {
		return []Listener{{Name: "admin API", Addr: admin.Addr()}, {Name: "proxy listener", Addr: every.Addr()}}
	}}
	t.Cleanup(s.Close)
	_, adminPort, _ := net.SplitHostPort(admin.Addr().String())
	_, everyPort, _ := net.SplitHostPort(every.Addr().String())
	for _, c := range []struct{ upstream, want string }{
		{"127.0.0.1:" + adminPort, "is Doppel's own admin API (" + admin.Addr().String() + ")"},
		{"localhost:" + adminPort, "is Doppel's own admin API"},
		{"0.0.0.0:" + adminPort, "is Doppel's own admin API"},
		{"[::ffff:127.0.0.1]:" + adminPort, "is Doppel's own admin API"},
		{"127.0.0.1:" + everyPort, "is Doppel's own proxy listener"},
		{"127.0.0.5:" + everyPort, "is Doppel's own proxy listener"},
		{"[::1]:" + everyPort, "is Doppel's own proxy listener"},
	} {
		code, body := call(t, s, "POST", "/proxies", `{"name":"p","listen":"127.0.0.1:0","upstream":"`+c.upstream+`"}`)
		wantError(t, code, body, 400, "bad request body: upstream ")
		if !strings.Contains(body, c.want) {
			t.Errorf("upstream %s: %s, want %q", c.upstream, body, c.want)
		}
	}
	// A listener on 127.0.0.1 is not reached through 127.0.0.2.
	if code, body := call(t, s, "POST", "/proxies", `{"name":"other","listen":"127.0.0.1:0","upstream":"127.0.0.2:`+adminPort+`"}`); code != 201 {
		t.Fatalf("another loopback address: %d %s", code, body)
	}
	// Nor this server's own proxies, nor its own listen.
	var db proxyJSON
	_, body := call(t, s, "POST", "/proxies", `{"name":"db","listen":"127.0.0.1:0","upstream":"127.0.0.1:1"}`)
	_ = json.Unmarshal([]byte(body), &db)
	code, body := call(t, s, "POST", "/proxies", `{"name":"loop","listen":"127.0.0.1:0","upstream":"`+db.Listen+`"}`)
	wantError(t, code, body, 400, "bad request body: upstream "+strconv.Quote(db.Listen)+" is Doppel's own Toxiproxy proxy \"db\"")
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	self := free.Addr().String()
	free.Close()
	code, body = call(t, s, "POST", "/proxies", `{"name":"self","listen":"`+self+`","upstream":"`+self+`"}`)
	wantError(t, code, body, 400, "bad request body: upstream "+strconv.Quote(self)+" is Doppel's own listen address")
	// An update to one is refused and leaves the proxy as it was.
	code, body = call(t, s, "POST", "/proxies/other", `{"upstream":"127.0.0.1:`+adminPort+`"}`)
	wantError(t, code, body, 400, "bad request body: upstream ")
	var other proxyJSON
	_, body = call(t, s, "GET", "/proxies/other", "")
	if _ = json.Unmarshal([]byte(body), &other); !other.Enabled || other.Upstream != "127.0.0.2:"+adminPort {
		t.Errorf("a refused update changed the proxy: %s", body)
	}
	code, body = call(t, s, "POST", "/populate", `[{"name":"zeta","listen":"127.0.0.1:0","upstream":"127.0.0.1:1"},{"name":"alpha","listen":"127.0.0.1:0","upstream":"127.0.0.1:`+adminPort+`"}]`)
	wantError(t, code, body, 400, "bad request body: upstream ")
	var answer struct {
		Proxies []proxyJSON `json:"proxies"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || len(answer.Proxies) != 1 || answer.Proxies[0].Name != "zeta" {
		t.Errorf("populate's answer names the proxies made before the refusal: %s", body)
	}
}

func TestTheBrowserCheckIgnoresCase(t *testing.T) {
	s := newServer(t)
	for _, ua := range []string{"Mozilla/5.0", "mozilla/5.0 (X11)", "MOZILLA/4.0"} {
		r := httptest.NewRequest("GET", "/proxies", nil)
		r.Header.Set("User-Agent", ua)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != http.StatusForbidden {
			t.Errorf("%q: %d, want 403", ua, w.Code)
		}
	}
	for _, ua := range []string{"toxiproxy-cli", "Go-http-client/1.1", "Mozill"} {
		r := httptest.NewRequest("GET", "/proxies", nil)
		r.Header.Set("User-Agent", ua)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Errorf("%q: %d, want 200", ua, w.Code)
		}
	}
}

// fill gives s n disabled proxies of MaxToxics toxics each, every name
// as long as it may be.
func fill(tb testing.TB, s *Server, n int) {
	tb.Helper()
	s.proxies = map[string]*proxy{}
	for i := range n {
		name := strconv.Itoa(i) + strings.Repeat("p", MaxName-len(strconv.Itoa(i)))
		up := &address{text: strings.Repeat("u", maxHost) + ":65535"}
		p := &proxy{name: name, listen: "127.0.0.1:0", upstream: up.text, resolved: up}
		for j := range MaxToxics {
			tn := strconv.Itoa(j) + strings.Repeat("t", MaxName-len(strconv.Itoa(j)))
			tx, e := decodeToxic([]byte(`{"name":"`+tn+`","type":"slicer","attributes":{"average_size":1000,"size_variation":100,"delay":1000}}`), nil)
			if e != nil {
				tb.Fatal(e)
			}
			p.toxics = append(p.toxics, tx)
		}
		s.proxies[name] = p
	}
}

// discard is an answer's writer that keeps nothing but the count; with
// peak set, it reads the live heap at each write of a value, after a
// collection, and keeps the highest.
type discard struct {
	h    http.Header
	n    int
	peak *uint64
}

func (d *discard) Header() http.Header { return d.h }
func (d *discard) WriteHeader(int)     {}
func (d *discard) Write(b []byte) (int, error) {
	d.n += len(b)
	if d.peak != nil && len(b) > 64 {
		*d.peak = max(*d.peak, liveHeap())
	}
	return len(b), nil
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// GET /proxies is encoded as it is written: while it writes, the live
// heap grows by a small share of the answer, where an answer built whole
// is all live at once.
func TestProxyIndexIsNotBuiltWhole(t *testing.T) {
	s := newServer(t)
	fill(t, s, 50)
	r := httptest.NewRequest("GET", "/proxies", nil)
	s.ServeHTTP(&discard{h: http.Header{}}, r) // warm: the routes, the encoder's caches
	var peak uint64
	w := &discard{h: http.Header{}, peak: &peak}
	before := liveHeap()
	s.ServeHTTP(w, r)
	if w.n < 1<<20 {
		t.Fatalf("the answer is %d bytes; the test wants one of megabytes", w.n)
	}
	if grew := int64(peak) - int64(before); grew > int64(w.n)/4 {
		t.Errorf("an answer of %d bytes grew the live heap by %d", w.n, grew)
	}
	var all map[string]struct {
		Toxics []map[string]any `json:"toxics"`
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, r)
	if err := json.Unmarshal(rec.Body.Bytes(), &all); err != nil || len(all) != 50 || len(all["0"+strings.Repeat("p", MaxName-1)].Toxics) != MaxToxics {
		t.Fatalf("the answer is not the proxies: %v, %d of them", err, len(all))
	}
}

// BenchmarkProxyIndexAtTheBounds is GET /proxies with every bound
// reached: 1,000 proxies of 100 toxics, every name 255 characters.
func BenchmarkProxyIndexAtTheBounds(b *testing.B) {
	s := &Server{}
	fill(b, s, MaxProxies)
	r := httptest.NewRequest("GET", "/proxies", nil)
	w := &discard{h: http.Header{}}
	s.ServeHTTP(w, r)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w.n = 0
		s.ServeHTTP(w, r)
	}
	b.ReportMetric(float64(w.n)/(1<<20), "answer-MiB")
}
