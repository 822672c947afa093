package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parkProxies are two proxies over one upstream with the same mocks: slow
// delays every answer by 300 ms (parked off the server), quick by none.
func parkProxies(up string) string {
	var b strings.Builder
	b.WriteString("proxies:\n")
	for _, p := range []struct{ name, extra string }{
		{"slow", "    resolve: {type: header, header: X-Slow}\n    latency: {percentage: 1, min: 0.3, max: 0.3}\n"},
		{"quick", ""},
	} {
		fmt.Fprintf(&b, `  - name: %s
    type: http
    url: %s/
%s    mocks:
      - name: json
        request: {method: GET, url: "^/mock/json$"}
        response: {status: 201, json: '{"a": 1}', headers: {X-Mine: "yes"}}
      - name: empty
        request: {method: GET, url: "^/mock/none$"}
        response: {status: 204}
      - name: teapot
        request: {method: GET, url: "^/mock/teapot$"}
        response: {status: 418, body: "short and stout"}
`, p.name, up, p.extra)
	}
	return b.String()
}

// parkUpstream answers /bytes with a fixed body and no Content-Type (the
// server sniffs one), /head-only to HEAD as GET would, /stream with a
// body of unknown length.
func parkUpstream(t testing.TB) string {
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bytes":
			w.Header()["Content-Type"] = nil // let the server sniff
			_, _ = io.WriteString(w, "<html><body>plain</body></html>")
		case "/stream":
			w.Header().Set("Content-Type", "text/plain")
			for i := range 3 {
				fmt.Fprintf(w, "part %d\n", i)
				w.(http.Flusher).Flush()
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "11")
			_, _ = io.WriteString(w, `{"up": true}`[:11])
		}
	}).URL
}

// rawAnswers sends requests on one connection at once (pipelined) and
// reads as many answers.
func rawAnswers(t *testing.T, addr string, requests ...string) ([]*http.Response, [][]byte, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := io.WriteString(c, strings.Join(requests, "")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var rs []*http.Response
	var bodies [][]byte
	for _, raw := range requests {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("answer %d: %v", len(rs)+1, err)
		}
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("answer %d body: %v", len(rs)+1, err)
		}
		rs = append(rs, res)
		bodies = append(bodies, b)
	}
	return rs, bodies, time.Since(start)
}

// TestAParkedAnswerIsTheSameAnswer: a delayed answer, written once the
// wait is over on a connection taken from the server, is byte for byte
// what the server writes for the same answer undelayed (but its Date and
// request id), after the delay, on a connection that goes on serving.
func TestAParkedAnswerIsTheSameAnswer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, parkProxies(parkUpstream(t)))
	// The admin API public, for the journal.
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	p, addr := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	admin := adminAddrOf(t, p)

	for _, tc := range []struct{ method, path string }{
		{"GET", "/small"}, {"HEAD", "/small"}, {"GET", "/bytes"}, {"GET", "/stream"},
		{"GET", "/mock/json"}, {"HEAD", "/mock/json"}, {"GET", "/mock/none"}, {"GET", "/mock/teapot"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req := func(slow bool) string {
				h := ""
				if slow {
					h = "X-Slow: slow\r\n"
				}
				return fmt.Sprintf("%s %s HTTP/1.1\r\nHost: d\r\nX-Request-Id: same\r\n%s\r\n", tc.method, tc.path, h)
			}
			quick, qb, _ := rawAnswers(t, addr, req(false))
			slow, sb, took := rawAnswers(t, addr, req(true))
			if took < 300*time.Millisecond {
				t.Errorf("the delayed answer came after %v", took)
			}
			q, s := quick[0], slow[0]
			if q.StatusCode != s.StatusCode || string(qb[0]) != string(sb[0]) {
				t.Errorf("quick %d %q, slow %d %q", q.StatusCode, qb[0], s.StatusCode, sb[0])
			}
			for _, h := range []http.Header{q.Header, s.Header} {
				if h.Get("Date") == "" {
					t.Error("no Date")
				}
				delete(h, "Date")
			}
			if !maps.EqualFunc(q.Header, s.Header, slices.Equal) {
				t.Errorf("headers differ:\nquick %v\nslow  %v", q.Header, s.Header)
			}
			if q.ContentLength != s.ContentLength || slices.Compare(q.TransferEncoding, s.TransferEncoding) != 0 && s.ContentLength < 0 {
				t.Errorf("framing: quick %d %v, slow %d %v", q.ContentLength, q.TransferEncoding, s.ContentLength, s.TransferEncoding)
			}
		})
	}

	t.Run("pipelined requests are answered in order, each delayed", func(t *testing.T) {
		req := func(id string) string {
			return "GET /mock/json HTTP/1.1\r\nHost: d\r\nX-Slow: slow\r\nX-Request-Id: " + id + "\r\n\r\n"
		}
		rs, bodies, took := rawAnswers(t, addr, req("first"), req("second"), req("third"))
		for i, id := range []string{"first", "second", "third"} {
			if got := rs[i].Header.Get("X-Request-Id"); got != id || rs[i].StatusCode != 201 || string(bodies[i]) != `{"a": 1}` {
				t.Errorf("answer %d: %d %s %q", i+1, rs[i].StatusCode, got, bodies[i])
			}
			if rs[i].Close {
				t.Errorf("answer %d closes the connection", i+1)
			}
		}
		if took < 900*time.Millisecond {
			t.Errorf("three delayed answers in %v", took)
		}
	})

	t.Run("a client asking to close is answered, then closed", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, "GET /mock/json HTTP/1.1\r\nHost: d\r\nX-Slow: slow\r\nConnection: close\r\n\r\n")
		all, err := io.ReadAll(c) // until the FIN
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(all))), nil)
		if err != nil || res.StatusCode != 201 || !res.Close {
			t.Fatalf("%v %v:\n%s", err, res, all)
		}
	})

	t.Run("a keep-alive client's connection is reused", func(t *testing.T) {
		reused := 0
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			if i.Reused {
				reused++
			}
		}}
		client := &http.Client{Transport: &http.Transport{Proxy: nil}}
		defer client.CloseIdleConnections()
		for range 3 {
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", "http://"+addr+"/small", nil)
			req.Header.Set("X-Slow", "slow")
			start := time.Now()
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || string(b) != `{"up": true`[:11] || time.Since(start) < 300*time.Millisecond {
				t.Fatalf("%d %q after %v", res.StatusCode, b, time.Since(start))
			}
			if res.Header.Get("X-Request-Id") == "" {
				t.Error("no request id")
			}
		}
		if reused != 2 {
			t.Errorf("%d of the 2 later requests reused the connection", reused)
		}
	})

	t.Run("each is logged and journaled with its wait", func(t *testing.T) {
		// Each is recorded once written: the last may still be on its way.
		const want = 8 + 3 + 1 + 3
		var slowLines int
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			slowLines = 0
			for _, l := range p.jsonLines() {
				if isRequest(l) && l["proxy"] == "slow" {
					slowLines++
					if d, _ := l["duration_ms"].(json.Number).Float64(); d < 299 {
						t.Fatalf("logged %v ms: %v", d, l)
					}
				}
			}
			if slowLines >= want || time.Now().After(deadline) {
				break
			}
		}
		if slowLines != want {
			t.Errorf("%d request lines of the slow proxy", slowLines)
		}
		r := mustGet(t, newClient(), "http://"+admin+"/api/v1/requests?proxy=slow&limit=100", nil)
		var list struct {
			Entries []struct {
				Status     int     `json:"status"`
				DurationMS float64 `json:"duration_ms"`
				Fault      struct {
					LatencyMS float64 `json:"latency_ms"`
				} `json:"fault"`
				ResponseBody json.RawMessage `json:"response_body"`
			} `json:"requests"`
		}
		if err := json.Unmarshal(r.body, &list); err != nil || len(list.Entries) != want {
			t.Fatalf("%v, %d entries: %.300s", err, len(list.Entries), r.body)
		}
		for _, e := range list.Entries {
			if e.DurationMS < 299 || e.Fault.LatencyMS <= 0 || e.Status == 0 {
				t.Errorf("journaled: %+v", e)
			}
		}
	})
}

// TestAParkedAnswerOutlivesTheSignal: a stopping Doppel answers the
// delayed requests waiting off its server, each with Connection: close,
// before it exits.
func TestAParkedAnswerOutlivesTheSignal(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t, t.TempDir(), 0, 0, parkProxies(parkUpstream(t)))
	p, addr := serveUp(t, cfg, nil)
	p.settle()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	_, _ = io.WriteString(c, "GET /mock/json HTTP/1.1\r\nHost: d\r\nX-Slow: slow\r\n\r\n")
	time.Sleep(100 * time.Millisecond)
	p.signalNow(syscall.SIGTERM)
	all, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(all))), nil)
	if err != nil || res.StatusCode != 201 || !res.Close {
		t.Fatalf("%v %v:\n%s", err, res, all)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("answered after %v, before its delay", took)
	}
	if code := p.waitExit(10 * time.Second); code != 0 {
		t.Fatalf("exit %d\n%s", code, p)
	}
	logged := false
	for _, l := range p.jsonLines() {
		logged = logged || isRequest(l) && l["proxy"] == "slow" && l["status"] == json.Number("201")
	}
	if !logged {
		t.Errorf("the answer is not logged:\n%s", p)
	}
}

// TestAKeptConnectionDoesNotHoldTheStop: a keep-alive connection whose
// delayed answer was written is idle, and a stopping Doppel closes it at
// once. The server counts a connection handed back to it as new, and
// waits five seconds for a new one's first request.
func TestAKeptConnectionDoesNotHoldTheStop(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/bytes", "/mock/json"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			cfg := serveConfig(t, t.TempDir(), 0, 0, parkProxies(parkUpstream(t)))
			p, addr := serveUp(t, cfg, nil)
			p.settle()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			br := bufio.NewReader(c)
			_, _ = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: d\r\nX-Slow: slow\r\n\r\n")
			res, err := http.ReadResponse(br, nil)
			if err != nil || res.Close {
				t.Fatalf("%v %+v", err, res)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			stop := time.Now()
			p.signalNow(syscall.SIGTERM)
			if code := p.waitExit(20 * time.Second); code != 0 {
				t.Fatalf("exit %d\n%s", code, p)
			}
			if took := time.Since(stop); took > 3*time.Second {
				t.Errorf("stopped %v after the signal with one idle connection", took.Round(time.Millisecond))
			}
			if _, err := br.ReadByte(); err == nil {
				t.Error("the idle connection stays open")
			}
		})
	}
}

// delayLogged is the line of a delayed request whose client left: its
// FIN may have been a half-close, so it is answered when the latency
// ends, and logged 499 as the answer finds nobody.
func delayLogged(l map[string]any) bool {
	return l["path"] == delayedPath && l["status"] == json.Number("499")
}

// delayedFor is the latency of delayedPath.
const delayedFor = 30 * time.Second

// TestDelaysWaitOnATimer: delayed requests wait off the server, on a
// timer, with no goroutine and little memory each (in the handler they
// held two goroutines and about 60 KiB, parked in a goroutine of their
// own 25 KiB); clients that leave free everything once their latency
// ends, and are logged as gone.
func TestDelaysWaitOnATimer(t *testing.T) {
	t.Parallel()
	const n = 500
	perDelay, rssBefore := holdHangs(t, n, delayedPath, delayLogged, delayedFor, 0)
	if total := perDelay*5000 + float64(rssBefore); total > 100<<20 {
		t.Errorf("%.1f KiB per delayed request: 5,000 would be %.0f MiB", perDelay/1024, total/(1<<20))
	}
}

// BenchmarkFiveThousandDelays holds 5,000 delayed requests at once and
// reports Doppel's resident memory then: go test ./cmd/doppel -run '^$'
// -bench FiveThousandDelays -benchtime 1x.
func BenchmarkFiveThousandDelays(b *testing.B) {
	for b.Loop() {
		perDelay, rssBefore := holdHangs(b, 5000, delayedPath, delayLogged, delayedFor, 0)
		b.ReportMetric((perDelay*5000+float64(rssBefore))/(1<<20), "MiB-RSS")
		b.ReportMetric(perDelay/1024, "KiB/delay")
	}
}
