package main

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestSeededRetriesAreNewAttempts: under --seed, a client that resends its
// X-Request-ID after an injected loss gets a roll of its own for each
// attempt, so a retry policy can succeed; and a second process with the
// same seed replays the same attempt counts, id for id.
func TestSeededRetriesAreNewAttempts(t *testing.T) {
	t.Parallel()
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "through") })
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("zeta", up.URL, "")+
		"    loss: {percentage: 0.5, status: 503}\n")
	const ids, most = 60, 8
	run := func() []int {
		p, addr := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0", "--seed", "retry-7")
		defer func() {
			p.signal(syscall.SIGTERM)
			p.waitExit(10 * time.Second)
		}()
		c := newClient()
		attempts := make([]int, ids)
		for i := range ids {
			id := fmt.Sprintf("order-%02d", i)
			for attempts[i] < most {
				attempts[i]++
				r := mustGet(t, c, "http://"+addr+"/pay", map[string]string{"X-Request-ID": id})
				if r.status == http.StatusOK && string(r.body) == "through" {
					break
				}
				if r.status != http.StatusServiceUnavailable {
					t.Fatalf("%s attempt %d: %d %s", id, attempts[i], r.status, r.body)
				}
				if attempts[i] == most {
					attempts[i] = most + 1 // never got through
				}
			}
		}
		return attempts
	}
	first := run()
	failed, retried := 0, 0
	for _, n := range first {
		if n > most {
			failed++
		}
		if n > 1 {
			retried++
		}
	}
	// Half the first attempts are lost; one id in 256 loses all eight.
	if failed > 3 {
		t.Errorf("%d of %d ids never got through in %d attempts: a retry is not a new roll (%v)", failed, ids, most, first)
	}
	if retried < 15 {
		t.Errorf("only %d of %d ids needed a retry under loss 0.5 (%v)", retried, ids, first)
	}
	second := run()
	for i := range first {
		if first[i] != second[i] {
			t.Errorf("order-%02d took %d attempts, then %d under the same seed", i, first[i], second[i])
		}
	}
}
