package main

import (
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestDashboardShowsTheReplicas: the status page lists every replica of
// the fleet with its state and revision, this one marked, a lost one
// said lost (SPEC §18.1).
func TestDashboardShowsTheReplicas(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	url, _ := publicFleet(t, "proxies:\n"+proxyYAML("zeta", "http://127.0.0.1:9", ""))
	key := map[string]string{"DOPPEL_FLEET_KEY": strings.Repeat("0f1e2d3c", 5)}
	first, admin, firstID, _ := fleetReplica(t, url, key)
	second, _, secondID, _ := fleetReplica(t, url, key)
	third, _, thirdID, _ := fleetReplica(t, url, key)
	secondProxy := "http://" + lineField(second.waitLine("the startup line", startTimeout, func(l string) bool { return lineMsg(l) == msgServing }), "proxy_addr")
	for range 2 {
		call(t, "GET", secondProxy+"/anything", "")
	}
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

	// The traffic page lists the fleet's journal: which replica served
	// each request, which replicas answered, which are missing.
	b.open("/requests")
	b.wait("the fleet's requests", "document.querySelectorAll('#requests-body tr').length === 2")
	cells := eval[[]string](b, "[...document.querySelectorAll('#requests-body td.replica')].map((td) => td.title)")
	if len(cells) != 2 || cells[0] != secondID || cells[1] != secondID {
		t.Fatalf("the replica column: %q, want %s twice", cells, secondID)
	}
	// Live: a request another replica serves arrives through the
	// stream, and the note says whose journals it follows.
	b.wait("the stream's replicas", "document.getElementById('fleet-note').innerText.includes('Following the journals of 2 replicas.')")
	call(t, "GET", secondProxy+"/live", "")
	b.wait("the live request", "document.querySelectorAll('#requests-body tr').length === 3")
	if cells := eval[[]string](b, "[...document.querySelectorAll('#requests-body td.replica')].map((td) => td.title)"); !slices.Equal(cells, []string{secondID, secondID, secondID}) {
		t.Fatalf("with a request live, the replica column: %q", cells)
	}
	note := eval[string](b, "document.getElementById('fleet-note').innerText")
	if !strings.Contains(note, "Missing: "+thirdID+" (lost)") {
		t.Fatalf("the fleet note: %q", note)
	}
	b.screenshot("requests-fleet")
	for _, p := range []*proc{first, second} {
		p.signal(syscall.SIGTERM)
		if code := p.waitExit(exitTimeout); code != wantOK {
			t.Fatalf("exit %d\n%s", code, p)
		}
	}
}
