package main

import (
	"fmt"
	"path/filepath"
	"regexp"
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

// The requests page shows a tcp connection as one: no HTTP status, and
// the faults that shaped it, bandwidth among them.
func TestDashboardShowsATCPConnection(t *testing.T) {
	exe := chromium(t)
	dir := t.TempDir()
	ports := freePorts(t, 3)
	listen := "127.0.0.1:" + strconv.Itoa(ports[2])
	cfg := writeFile(t, dir, "main.yaml", fmt.Sprintf(`server: {host: 127.0.0.1, port: %d}
admin:
  host: 127.0.0.1
  port: %d
  access: {list: public, read: public}
templates: {dir: %s}
control: {socket: %s}
proxies:
  - name: db
    type: tcp
    listen: %s
    upstream: %s
    latency: {percentage: 1, min: 0.05, max: 0.05}
    bandwidth: {percentage: 1, bytes_per_second: 1Mi}
`, ports[0], ports[1], strconv.Quote(filepath.Join(dir, "templates")), strconv.Quote(filepath.Join(dir, "doppel.sock")), listen, tcpEcho(t)))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	p.waitServing()
	base := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	waitListening(t, p, "127.0.0.1:"+strconv.Itoa(ports[1]))
	c := tcpDial(t, listen)
	echoBack(t, c, []byte("ping"))
	c.Close()
	connectionLine(t, p)

	b := newBrowser(t, exe, base)
	eval[bool](b, "sessionStorage.setItem('doppel.anonymous', '1'), true")
	b.open("/requests")
	b.wait("the connection", "document.querySelectorAll('#requests-body tr').length === 1")
	cells := eval[[]string](b, "[...document.querySelector('#requests-body tr').cells].map((c) => c.textContent)")
	// Time, method, path, proxy, mock, status, faults, duration, upstream.
	if len(cells) != 9 || cells[1] != "TCP" || cells[3] != "db" || cells[5] != "—" {
		t.Errorf("the row: %q", cells)
	}
	if !regexp.MustCompile(`^tunnellatency \d+ msbandwidth$`).MatchString(cells[6]) {
		t.Errorf("the faults: %q", cells[6])
	}
	b.click("#requests-body tr")
	b.wait("the detail", "!document.getElementById('request-detail').hidden")
	if s := eval[string](b, "document.querySelector('#request-detail h2').textContent"); strings.Contains(s, "null") || !strings.HasSuffix(s, "—") {
		t.Errorf("the detail's title: %q", s)
	}
}
