package main

import (
	"strings"
	"syscall"
	"testing"

	"github.com/doppelproxy/doppel/internal/store/pgtest"
)

// TestDashboardShowsTheReplicas: the status page lists every replica of
// the fleet with its state and revision, this one marked, a lost one
// said lost (SPEC §18.1).
func TestDashboardShowsTheReplicas(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	url := pgtest.URL(t)
	if r := doppel(t, invocation{args: []string{"config", "migrate", "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("zeta", "http://127.0.0.1:9", ""))
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	if r := doppel(t, invocation{args: []string{"config", "push", "--config", cfg, "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	first, admin, firstID, _ := fleetReplica(t, url, nil)
	second, _, secondID, _ := fleetReplica(t, url, nil)
	third, _, thirdID, _ := fleetReplica(t, url, nil)
	killReplica(t, url, third, thirdID)

	b := newBrowser(t, exe, admin)
	b.open("/status")
	b.wait("the replicas", "document.querySelectorAll('#status-replicas tbody tr').length === 3")
	rows := eval[[]string](b, "[...document.querySelectorAll('#status-replicas tbody tr')].map((tr) => tr.innerText.replace(/\\s+/g, ' '))")
	if !strings.HasPrefix(rows[0], firstID+" (this one) live "+admin) || !strings.HasPrefix(rows[1], secondID+" live ") || !strings.HasPrefix(rows[2], thirdID+" lost ") {
		t.Fatalf("the rows: %q", rows)
	}
	if s := eval[string](b, "document.getElementById('status-fleet').textContent"); s != "2 live, 1 lost" {
		t.Fatalf("the summary: %q", s)
	}
	if !eval[bool](b, "document.querySelectorAll('#status-replicas tr.replica-lost').length === 1") {
		t.Fatal("the lost replica is not marked")
	}
	eval[bool](b, "document.getElementById('status-replicas').scrollIntoView({block: 'center'}), true")
	b.screenshot("status-replicas")
	for _, p := range []*proc{first, second} {
		p.signal(syscall.SIGTERM)
		if code := p.waitExit(exitTimeout); code != wantOK {
			t.Fatalf("exit %d\n%s", code, p)
		}
	}
}
