package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The proxy list and a tcp proxy's page say what it relays, and where.
func TestDashboardShowsATCPProxy(t *testing.T) {
	exe := chromium(t)
	dir := t.TempDir()
	ports := freePorts(t, 3)
	listen := "127.0.0.1:" + strconv.Itoa(ports[2])
	cfg := writeFile(t, dir, "main.yaml", fmt.Sprintf(`server: {host: 127.0.0.1, port: %d}
admin:
  host: 127.0.0.1
  port: %d
  tokens:
    - {name: root, group: admin, token: %s}
  access: {list: public, read: public}
templates: {dir: %s}
control: {socket: %s}
proxies:
  - name: db
    type: tcp
    listen: %s
    upstream: db.internal:5432
    latency: {percentage: 1, min: 0.1, max: 0.2}
`, ports[0], ports[1], dashboardToken, strconv.Quote(filepath.Join(dir, "templates")), strconv.Quote(filepath.Join(dir, "doppel.sock")), listen))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	p.waitServing()
	base := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	waitListening(t, p, "127.0.0.1:"+strconv.Itoa(ports[1]))

	b := newBrowser(t, exe, base)
	eval[bool](b, "sessionStorage.setItem('doppel.anonymous', '1'), true")
	b.open("/")
	b.wait("the list", "document.querySelector('tr[data-proxy=db]') !== null")
	row := eval[string](b, "document.querySelector('tr[data-proxy=db]').innerText")
	if !strings.Contains(row, "tcp://db.internal:5432") || !strings.Contains(row, "listens on "+listen) || !strings.Contains(row, "latency") {
		t.Errorf("the row: %q", row)
	}
	b.open("/proxies/db")
	b.wait("the page", "document.body.innerText.includes('Relays the connections')")
	if s := eval[string](b, "document.body.innerText"); !strings.Contains(s, "Relays the connections it accepts on "+listen+" to db.internal:5432") {
		t.Errorf("the page: %.400q", s)
	}
}
