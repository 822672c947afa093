package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/store/pgtest"
)

type replicaRow struct {
	ID, URL, Host, Version, Revision, State string
	PID                                     int
	Self                                    bool
}

// fleetReplica starts serve on the database: its proc, proxy URL, admin
// URL and the replica id and advertised URL its startup line gives.
func fleetReplica(t *testing.T, url string, env map[string]string, extra ...string) (p *proc, admin, id, advertised string) {
	t.Helper()
	args := append([]string{"serve", "--store", "postgres", "--database-url", url, "--proxy-addr", "127.0.0.1:0",
		"--socket", filepath.Join(t.TempDir(), "s.sock")}, extra...)
	if !strings.Contains(strings.Join(extra, " "), "--admin-addr") {
		args = append(args, "--admin-addr", "127.0.0.1:0")
	}
	p = startProc(t, invocation{args: args, env: env})
	line := p.waitLine("the startup line", startTimeout, func(l string) bool { return lineMsg(l) == msgServing })
	admin = "http://" + lineField(p.waitLine("admin", 10*time.Second, func(l string) bool { return lineMsg(l) == "the admin API is listening" }), "admin_addr")
	return p, admin, lineField(line, "replica"), lineField(line, "advertise")
}

// killReplica kills p with SIGKILL and ages its heartbeat past 10 s in the
// database, as if that long had passed: it is lost.
func killReplica(t *testing.T, url string, p *proc, id string) {
	t.Helper()
	p.signal(syscall.SIGKILL)
	p.waitExit(exitTimeout)
	pgtest.Exec(t, url, `UPDATE doppel_replicas SET seen_at = now() - interval '11 seconds' WHERE id = $1`, id)
}

type fleetStatus struct {
	Replica string
	Fleet   struct{ Live, Lost int }
}

// waitFleet waits for the status to count live and lost replicas, as the
// heartbeats that follow a change find them (every 2 s).
func waitFleet(t *testing.T, admin string, live, lost int) fleetStatus {
	t.Helper()
	deadline := time.Now().Add(3 * 2 * time.Second)
	for {
		var st fleetStatus
		_ = json.Unmarshal(call(t, "GET", admin+"/api/v1/status", "").body, &st)
		if st.Fleet.Live == live && st.Fleet.Lost == lost {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status counts %+v, want %d live and %d lost", st.Fleet, live, lost)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// publicFleet is a fresh database, migrated, holding a document of body
// whose admin API is public: what a fleet's replicas serve. It returns the
// database's URL and the document's file.
func publicFleet(t *testing.T, body string) (url, cfg string) {
	t.Helper()
	url = pgtest.URL(t)
	if r := doppel(t, invocation{args: []string{"config", "migrate", "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	dir := t.TempDir()
	cfg = serveConfig(t, dir, 0, 0, body)
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	if r := doppel(t, invocation{args: []string{"config", "push", "--config", cfg, "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	return url, cfg
}

func replicasOf(t *testing.T, admin string) []replicaRow {
	t.Helper()
	r := call(t, "GET", admin+"/api/v1/replicas", "")
	var list struct{ Replicas []replicaRow }
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 {
		t.Fatalf("GET /api/v1/replicas: %d %s", r.status, r.body)
	}
	return list.Replicas
}

// TestReplicasRegister: every serve on a database registers with a new
// id and the admin URL its peers reach it at (the listener's, or
// --advertise / DOPPEL_ADVERTISE_URL), is listed by every replica, leaves
// on a clean shutdown and is reported lost once its heartbeat stops (SPEC
// §18.1). `doppel replicas` prints the table and the JSON.
func TestReplicasRegister(t *testing.T) {
	t.Parallel()
	url, _ := publicFleet(t, "proxies:\n"+proxyYAML("zeta", "http://127.0.0.1:9", ""))
	if r := doppel(t, invocation{args: []string{"serve", "--store", "postgres", "--database-url", url, "--advertise", "10.0.0.5:8081"}}); r.code != 2 || !strings.Contains(r.stderr, "not an admin URL peers can call") {
		t.Fatalf("a bad --advertise: %s", r)
	}

	first, firstAdmin, firstID, firstURL := fleetReplica(t, url, nil)
	if firstURL != firstAdmin || len(firstID) != 22 {
		t.Fatalf("the startup line: replica %q advertise %q (admin %s)", firstID, firstURL, firstAdmin)
	}
	second, secondAdmin, secondID, secondURL := fleetReplica(t, url, map[string]string{"DOPPEL_ADVERTISE_URL": "http://doppel-2.internal:8081"})
	if secondURL != "http://doppel-2.internal:8081" {
		t.Fatalf("DOPPEL_ADVERTISE_URL: %q", secondURL)
	}
	rs := replicasOf(t, firstAdmin)
	if len(rs) != 2 || rs[0].ID != firstID || !rs[0].Self || rs[1].ID != secondID || rs[1].Self || rs[1].URL != secondURL ||
		rs[0].State != "live" || rs[1].State != "live" || rs[0].Revision == "" || rs[0].PID == 0 {
		t.Fatalf("the first replica's list: %+v", rs)
	}
	if rs := replicasOf(t, secondAdmin); len(rs) != 2 || rs[0].Self || !rs[1].Self {
		t.Fatalf("the second replica's list: %+v", rs)
	}
	if st := waitFleet(t, firstAdmin, 2, 0); st.Replica != firstID {
		t.Fatalf("status: %+v", st)
	}
	table := doppel(t, invocation{args: []string{"replicas", "--admin", firstAdmin}})
	lines := strings.Split(strings.TrimSpace(table.stdout), "\n")
	if table.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") || !strings.HasPrefix(lines[1], firstID+" *") ||
		!strings.Contains(lines[2], secondID) || !strings.Contains(lines[2], "live") || !strings.Contains(lines[2], secondURL) {
		t.Fatalf("doppel replicas: %s", table)
	}

	// A clean shutdown deletes the row.
	second.signal(syscall.SIGTERM)
	if code := second.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("exit %d\n%s", code, second)
	}
	if rs := replicasOf(t, firstAdmin); len(rs) != 1 || rs[0].ID != firstID {
		t.Fatalf("after a clean shutdown: %+v", rs)
	}

	// A replica killed stops beating: lost once its heartbeat is 10 s old
	// (aged here in the database rather than waited for).
	third, _, thirdID, _ := fleetReplica(t, url, nil)
	killReplica(t, url, third, thirdID)
	if rs := replicasOf(t, firstAdmin); len(rs) != 2 || rs[1].ID != thirdID || rs[1].State != "lost" {
		t.Fatalf("after kill -9: %+v", rs)
	}
	waitFleet(t, firstAdmin, 1, 1)
	js := doppel(t, invocation{args: []string{"replicas", "--admin", firstAdmin, "-o", "json"}})
	var list struct{ Replicas []replicaRow }
	if err := json.Unmarshal([]byte(js.stdout), &list); err != nil || js.code != 0 || len(list.Replicas) != 2 || list.Replicas[1].State != "lost" {
		t.Fatalf("doppel replicas -o json: %s", js)
	}
	first.signal(syscall.SIGTERM)
	if code := first.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("exit %d\n%s", code, first)
	}
}

// TestAFileStoreInstanceIsAFleetOfOne: without the database the instance
// lists itself, and its status says one replica.
func TestAFileStoreInstanceIsAFleetOfOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "")
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
	line := p.waitLine("the startup line", startTimeout, func(l string) bool { return lineMsg(l) == msgServing })
	admin := "http://" + lineField(p.waitLine("admin", 10*time.Second, func(l string) bool { return lineMsg(l) == "the admin API is listening" }), "admin_addr")
	rs := replicasOf(t, admin)
	if len(rs) != 1 || !rs[0].Self || rs[0].ID != lineField(line, "replica") || rs[0].URL != admin || rs[0].State != "live" || rs[0].Revision != lineField(line, "revision") {
		t.Fatalf("%+v (startup: %s)", rs, line)
	}
}
