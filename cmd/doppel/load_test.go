package main

// SPEC §9.4, §9.6 under load, through the real binary: requests keep
// flowing, none fails and none reaches the wrong upstream, while the
// configuration is reloaded and written over the admin API.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestReloadsAndWritesUnderLoad(t *testing.T) {
	t.Parallel()
	const (
		duration = 5 * time.Second
		workers  = 32
		reloads  = 100
		writes   = 100
	)
	var urls = map[string]string{}
	for _, name := range []string{"alpha", "beta", "side"} {
		name := name
		urls[name] = upstream(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, name)
		}).URL
	}
	cfg := serveConfig(t, t.TempDir(), 0, 0, "proxies:\n"+
		proxyYAML("alpha", urls["alpha"], "X-Route")+
		proxyYAML("beta", urls["beta"], "X-Route")+
		proxyYAML("side", urls["side"], "X-Route")+"    headers: {X-Alt: a}\n")
	p := startProc(t, invocation{
		args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
		env:  map[string]string{"DOPPEL_ADMIN_TOKENS": `{"ci": {"token": "` + envToken + `", "group": "admin"}}`},
	})
	proxyAddr := p.waitServing()
	adminAddr := lineField(p.waitLine("the admin listener", startTimeout, func(l string) bool {
		return lineMsg(l) == "the admin API is listening"
	}), "admin_addr")

	admin := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil}}
	call := func(method, path, body string, header map[string]string) (int, http.Header, string, error) {
		req, _ := http.NewRequest(method, "http://"+adminAddr+path, strings.NewReader(body))
		req.Header.Set("X-Proxy-Authorization", "Bearer "+envToken)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := admin.Do(req)
		if err != nil {
			return 0, nil, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(b), err
	}
	status, hdr, body, err := call("GET", "/api/v1/proxies/side", "", nil)
	if err != nil || status != 200 {
		t.Fatalf("read side: %d %v %s", status, err, body)
	}
	etag := hdr.Get("ETag")

	stop := make(chan struct{})
	var ok, failed, misrouted atomic.Int64
	var firstBad atomic.Value
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				want := []string{"alpha", "beta"}[(w+i)%2]
				r, err := get(c, "http://"+proxyAddr+"/x", map[string]string{"X-Route": want})
				switch {
				case err != nil || r.status != 200:
					failed.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("failed: status %d, %v, %s", r.status, err, r.body))
				case string(r.body) != want:
					misrouted.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("misrouted: wanted %s, got %q", want, r.body))
				default:
					ok.Add(1)
				}
			}
		}()
	}

	// 100 reloads and 100 writes of "side", spread over the run.
	var adminErrs []string
	start := time.Now()
	tick := time.NewTicker(duration / writes)
	for i := range writes {
		<-tick.C
		status, _, body, err := call("POST", "/api/v1/config/reload", "", nil)
		if err != nil || status != 200 {
			adminErrs = append(adminErrs, fmt.Sprintf("reload %d: %d %v %s", i, status, err, body))
		}
		doc, _ := json.Marshal(map[string]any{"proxy": map[string]any{
			"name": "side", "type": "http", "url": urls["side"],
			"resolve": map[string]any{"type": "header", "header": "X-Route"},
			"headers": map[string]any{"X-Alt": []string{"a", "b"}[i%2]},
		}})
		status, hdr, body, err = call("PUT", "/api/v1/proxies/side", string(doc), map[string]string{"If-Match": etag})
		if err != nil || status != 200 {
			adminErrs = append(adminErrs, fmt.Sprintf("write %d: %d %v %s", i, status, err, body))
			continue
		}
		etag = hdr.Get("ETag")
	}
	tick.Stop()
	if rest := duration - time.Since(start); rest > 0 {
		time.Sleep(rest)
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)

	total := ok.Load() + failed.Load() + misrouted.Load()
	t.Logf("%d requests in %v: %.0f requests/s, with %d reloads and %d writes", total, elapsed.Round(time.Millisecond),
		float64(total)/elapsed.Seconds(), reloads, writes)
	for _, e := range adminErrs {
		t.Error(e)
	}
	if failed.Load() != 0 || misrouted.Load() != 0 {
		t.Errorf("%d failed and %d misrouted of %d requests; the first: %v", failed.Load(), misrouted.Load(), total, firstBad.Load())
	}
	if ok.Load() < 1000 {
		t.Errorf("only %d requests succeeded: the load never happened", ok.Load())
	}
	// The last write is in force.
	status, _, body, _ = call("GET", "/api/v1/proxies/side", "", nil)
	if status != 200 || !strings.Contains(body, `"X-Alt":"b"`) && !strings.Contains(body, `"X-Alt": "b"`) {
		t.Errorf("side after the writes: %d %s", status, body)
	}
}
