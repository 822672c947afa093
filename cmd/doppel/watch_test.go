package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWatchPicksUpEdits: with --watch, an editor's save (a temporary file
// renamed over the document) is in force within a second; a bad edit is
// logged with its violations and the running configuration stays.
func TestWatchPicksUpEdits(t *testing.T) {
	t.Parallel()
	one := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "one") })
	two := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "two") })
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("zeta", one.URL, ""))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--watch", "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--seed", "s"}})
	addr := p.waitServing()
	adminAddr := lineField(p.waitLine("admin", 10*time.Second, func(l string) bool { return lineMsg(l) == "the admin API is listening" }), "admin_addr")

	save := func(content string) {
		tmp := filepath.Join(dir, ".main.yaml.swp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfg); err != nil {
			t.Fatal(err)
		}
	}
	src := readFile(t, cfg)
	save(strings.Replace(src, one.URL, two.URL, 1))
	saved := time.Now()
	for {
		r, err := get(newClient(), "http://"+addr+"/x", nil)
		if err == nil && string(r.body) == "two" {
			break
		}
		if time.Since(saved) > time.Second {
			t.Fatalf("the edit was not in force within 1s\n%s", p)
		}
		time.Sleep(10 * time.Millisecond)
	}

	save(strings.Replace(src, "type: http", "type: udp", 1))
	p.waitLine("the rejection", 5*time.Second, func(l string) bool {
		return lineMsg(l) == "the edited configuration is rejected; the running one stays" && strings.Contains(l, "proxies[0].type")
	})
	if r, err := get(newClient(), "http://"+addr+"/x", nil); err != nil || string(r.body) != "two" {
		t.Fatalf("a rejected edit changed what is served: %v %s", err, r.body)
	}

	// /api/v1/status says a seed is in force, without saying which.
	st := mustGet(t, newClient(), "http://"+adminAddr+"/api/v1/status", nil)
	var status map[string]any
	_ = json.Unmarshal(st.body, &status)
	if status["seeded"] != true {
		t.Fatalf("status: %s", st.body)
	}
	p.signal(syscall.SIGTERM)
	p.waitExit(exitTimeout)

	r := doppel(t, invocation{args: []string{"serve", "--store", "postgres", "--database-url", "postgres://h/db", "--watch"}})
	if r.code != 2 || !strings.Contains(r.stderr, "--watch") {
		t.Fatalf("--watch with postgres: %s", r)
	}
}
