package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// trafficDoc has a proxy that forwards and mocks (shop), and one that
// drops every request it gets (flaky, chosen by X-Backend: flaky).
func trafficDoc(dir string, serverPort, adminPort int, upstream string) string {
	return fmt.Sprintf(`server: {host: 127.0.0.1, port: %d}
admin:
  host: 127.0.0.1
  port: %d
  tokens:
    - {name: root, group: admin, token: %s}
  access:
    list: public
    read: public
templates:
  dir: %s
control:
  socket: %s
proxies:
  - name: shop
    type: http
    url: %s
    mocks:
      - name: hello
        request: {method: GET, url: "^/hello$"}
        response: {status: 200, json: '{"hello": "world"}'}
  - name: flaky
    type: http
    url: %s
    resolve: {type: header, header: X-Backend}
    loss: {percentage: 1, status: 503}
`, serverPort, adminPort, dashboardToken, strconv.Quote(filepath.Join(dir, "templates")), strconv.Quote(filepath.Join(dir, "doppel.sock")), upstream, upstream)
}

// The requests page: the journal's entries, then new ones live; pause,
// an entry's headers (masked), the filters, clear; and the mocks' hits on
// the proxy list.
func TestDashboardShowsTraffic(t *testing.T) {
	exe := chromium(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"order": 7}`)
	}))
	defer upstream.Close()
	dir := t.TempDir()
	ports := freePorts(t, 2)
	cfg := writeFile(t, dir, "main.yaml", trafficDoc(dir, ports[0], ports[1], upstream.URL))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	p.waitServing()
	base := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	proxyBase := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	waitListening(t, p, "127.0.0.1:"+strconv.Itoa(ports[1]))

	send := func(method, path, body string, header ...string) {
		t.Helper()
		req, _ := http.NewRequest(method, proxyBase+path, strings.NewReader(body))
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	rows := "document.querySelectorAll('#requests-body tr').length"
	row := func(b *browser, i int) string {
		return eval[string](b, "document.querySelectorAll('#requests-body tr')["+strconv.Itoa(i)+"].innerText")
	}

	b := newBrowser(t, exe, base)
	// Recorded before the page opens: the page loads it from the list.
	send("GET", "/hello", "")

	t.Run("anonymous: no clear", func(t *testing.T) {
		b.t = t
		eval[bool](b, "sessionStorage.setItem('doppel.anonymous', '1'), true")
		b.open("/requests")
		b.wait("the page following the stream", "document.querySelector('#stream-state.live') && "+rows+" === 1")
		if !eval[bool](b, "document.getElementById('clear').hidden") {
			t.Error("Clear is shown to a caller who may not update")
		}
		if !eval[bool](b, "document.querySelector('nav a[data-route=\"requests\"]').classList.contains('current')") {
			t.Error("the nav does not mark Requests")
		}
	})

	t.Run("live", func(t *testing.T) {
		b.t = t
		eval[bool](b, "localStorage.setItem('doppel.token', JSON.stringify({value: '"+dashboardToken+"', expires: Date.now() + 3600000})), true")
		b.open("/")
		b.click(`nav a[data-route="requests"]`)
		b.wait("the page following the stream", "location.pathname === '/requests' && document.querySelector('#stream-state.live') && "+rows+" === 1")
		if eval[bool](b, "document.getElementById('clear').hidden") {
			t.Error("Clear is hidden from the admin")
		}
		send("POST", "/orders", `{"item": 1}`)
		b.wait("the forwarded request", rows+" === 2")
		send("GET", "/pay", "", "X-Backend", "flaky", "Authorization", "Bearer s3cret-value")
		b.wait("the dropped request", rows+" === 3")
		send("GET", "/hello", "")
		b.wait("the mocked request", rows+" === 4")
		// Newest on top.
		if s := row(b, 0); !strings.Contains(s, "/hello") || !strings.Contains(s, "shop") || !strings.Contains(s, "hello") || !strings.Contains(s, "200") || !strings.Contains(s, "mock") {
			t.Errorf("the mocked row: %q", s)
		}
		if s := row(b, 1); !strings.Contains(s, "/pay") || !strings.Contains(s, "flaky") || !strings.Contains(s, "503") || !strings.Contains(s, "loss") {
			t.Errorf("the dropped row: %q", s)
		}
		if s := row(b, 2); !strings.Contains(s, "POST") || !strings.Contains(s, "/orders") || !strings.Contains(s, "201") || !strings.Contains(s, "none") ||
			strings.Count(s, " ms") != 2 {
			t.Errorf("the forwarded row (duration and upstream ms): %q", s)
		}
	})

	t.Run("pause and resume", func(t *testing.T) {
		b.t = t
		b.click("#pause")
		send("GET", "/orders/1", "")
		send("GET", "/orders/2", "")
		b.wait("the count", "document.getElementById('pending').textContent === '2 new requests not shown' && !document.getElementById('pending').hidden")
		if n := eval[int](b, rows); n != 4 {
			t.Errorf("paused, the table has %d rows, want 4", n)
		}
		b.click("#pause")
		b.wait("the new rows drawn", rows+" === 6 && document.getElementById('pending').hidden")
		if s := row(b, 0); !strings.Contains(s, "/orders/2") {
			t.Errorf("after resuming, the top row: %q", s)
		}
	})

	t.Run("an entry's headers and bodies", func(t *testing.T) {
		b.t = t
		b.click(`#requests-body tr:nth-child(4)`) // GET /pay
		b.wait("the detail", "!document.getElementById('request-detail').hidden")
		auth := eval[string](b, "[...document.querySelectorAll('#detail-request dl.headers dt')].find((e) => e.textContent === 'Authorization').nextElementSibling.textContent")
		if auth != "***" {
			t.Errorf("Authorization is shown as %q, want ***", auth)
		}
		if s := eval[string](b, "document.getElementById('request-detail').innerText"); strings.Contains(s, "s3cret") || !strings.Contains(s, "X-Backend") ||
			!strings.Contains(s, "LOSS_INJECTED") || !strings.Contains(s, "GET /pay") {
			t.Errorf("the detail: %q", s)
		}
		// Each row's time and the detail's: the browser's clock to the
		// millisecond, the UTC time on hover.
		times := b.checkTimes()
		rowTimes := 0
		for _, e := range times {
			if e.Where == "requests-body" {
				rowTimes++
				if !regexp.MustCompile(`:\d\d\.\d{3} [AP]M$`).MatchString(e.Text) {
					t.Errorf("a row's time without its milliseconds: %q", e.Text)
				}
			}
		}
		if rowTimes != 6 {
			t.Errorf("%d rows with a time, want 6", rowTimes)
		}
		if e := timeIn(b, times, "request-detail"); e.Datetime != eval[string](b, "document.querySelector('#requests-body tr:nth-child(4) time').getAttribute('datetime')") {
			t.Errorf("the detail's time is %s, not its row's", e.Datetime)
		}
		b.click(`#requests-body tr:nth-child(6)`) // the first GET /hello
		b.wait("the response body", "document.getElementById('detail-response').textContent.includes('\"hello\": \"world\"') || document.getElementById('detail-response').textContent.includes('\"hello\":\"world\"')")
		b.click(`#requests-body tr:nth-child(5)`) // POST /orders
		b.wait("the request body", "document.getElementById('detail-request').textContent.includes('{\"item\": 1}')")
		// The picture shows the dropped request: its fault, its masked header.
		b.click(`#requests-body tr:nth-child(4)`)
		b.wait("the detail of GET /pay", "document.getElementById('request-detail').textContent.includes('LOSS_INJECTED')")
		eval[bool](b, "window.scrollTo(0, 0), true")
		b.do("moving the pointer away", chromedp.MouseClickXY(1270, 850))
		b.screenshot("requests")
	})

	t.Run("filters", func(t *testing.T) {
		b.t = t
		b.set("#filter-status", "5xx")
		b.wait("only the 503", rows+" === 1 && document.querySelector('#requests-body tr').innerText.includes('503')")
		b.set("#filter-status", "201")
		b.wait("the 201s", rows+" === 3")
		b.set("#filter-status", "2xx")
		b.wait("the 2xx", rows+" === 5")
		b.set("#filter-status", "")
		b.set("#filter-proxy", "flaky")
		b.wait("flaky's only", rows+" === 1 && document.querySelector('#requests-body tr').innerText.includes('flaky')")
		// A new entry of another proxy is not drawn under the filter.
		send("GET", "/hello", "")
		b.set("#filter-proxy", "")
		b.wait("all again, with the new one", rows+" === 7")
	})

	t.Run("hits on the proxy list", func(t *testing.T) {
		b.t = t
		b.click(`nav a[data-route=""]`)
		b.wait("the list", "document.querySelector('tr[data-proxy=shop] td.hits')")
		if s := eval[string](b, "document.querySelector('tr[data-proxy=shop] td.hits').textContent"); s != "3" {
			t.Errorf("shop's hits: %q, want 3", s)
		}
		if s := eval[string](b, "document.querySelector('tr[data-proxy=shop] td.hits').title"); s != "hello: 3" {
			t.Errorf("shop's hits tooltip: %q", s)
		}
		if s := eval[string](b, "document.querySelector('tr[data-proxy=flaky] td.hits').textContent"); s != "0" {
			t.Errorf("flaky's hits: %q, want 0", s)
		}
	})

	t.Run("clear", func(t *testing.T) {
		b.t = t
		b.open("/requests") // a client route survives a reload
		b.wait("the page", "document.querySelector('#stream-state.live') && "+rows+" === 7")
		b.click("#clear")
		b.wait("cleared", rows+" === 0 && document.getElementById('toast').textContent === 'Cleared the journal'")
		if _, body := adminCall(t, base, "GET", "/api/v1/requests", ""); len(body["requests"].([]any)) != 0 {
			t.Errorf("the journal still has %d entries after clear", len(body["requests"].([]any)))
		}
		// Still following.
		send("GET", "/hello", "")
		b.wait("a new one after clear", rows+" === 1")
	})

	// The page keeps at most 500 rows: the oldest go.
	t.Run("at most 500 rows", func(t *testing.T) {
		b.t = t
		for i := range 520 {
			send("GET", "/orders/"+strconv.Itoa(i), "")
		}
		b.wait("the newest on top", "document.querySelector('#requests-body tr').innerText.includes('/orders/519')")
		if n := eval[int](b, rows); n != 500 {
			t.Errorf("%d rows, want 500", n)
		}
		if s := row(b, 499); !strings.Contains(s, "/orders/20\t") && !strings.Contains(s, "/orders/20 ") {
			t.Errorf("the last row: %q, want /orders/20", s)
		}
	})
}
