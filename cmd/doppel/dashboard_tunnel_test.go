package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The requests page shows a WebSocket's tunnel: a tag on its row, and
// what it relayed each way in its detail.
func TestDashboardShowsATunnel(t *testing.T) {
	exe := chromium(t)
	dir := t.TempDir()
	ports := freePorts(t, 2)
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
  - name: chat
    type: http
    url: %s/v2/
`, ports[0], ports[1], dashboardToken, strconv.Quote(filepath.Join(dir, "templates")), strconv.Quote(filepath.Join(dir, "doppel.sock")), wsUpstream(t)))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	p.waitServing()
	base := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	waitListening(t, p, "127.0.0.1:"+strconv.Itoa(ports[1]))

	b := newBrowser(t, exe, base)
	eval[bool](b, "sessionStorage.setItem('doppel.anonymous', '1'), true")
	b.open("/requests")
	b.wait("the page following the stream", "document.querySelector('#stream-state.live') !== null")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://127.0.0.1:"+strconv.Itoa(ports[0])+"/echo", &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := c.Write(ctx, websocket.MessageText, []byte(strings.Repeat("m", 100))); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
	line := tunnelLine(t, p, "/echo")

	b.wait("the tunnel's row", "document.querySelectorAll('#requests-body tr').length === 1")
	row := eval[string](b, "document.querySelector('#requests-body tr').innerText")
	if !strings.Contains(row, "101") || !strings.Contains(row, "tunnel") {
		t.Errorf("the row: %q", row)
	}
	b.click("#requests-body tr")
	b.wait("the detail", "document.getElementById('detail-tunnel') !== null")
	want := fmt.Sprintf("Tunnel: %s bytes from the client, %s bytes from the upstream, open ",
		thousands(int(number(line["tunnel_bytes_up"]))), thousands(int(number(line["tunnel_bytes_down"]))))
	if got := eval[string](b, "document.getElementById('detail-tunnel').textContent"); !strings.HasPrefix(got, want) {
		t.Errorf("the detail says %q, want %q…", got, want)
	}
}

// thousands writes n as en-US does: 4,356.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
