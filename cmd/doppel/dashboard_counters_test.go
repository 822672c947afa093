package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const viewerToken = "e1e1e1e1-2222-4222-8222-e1e1e1e1e1e1"

// accessDocHead is the top of the browser tests' documents: both listeners,
// the templates and the socket in dir, and two tokens: root (group admin)
// may do anything, viewer (group user) may list and read, not update.
func accessDocHead(dir string, serverPort, adminPort int) string {
	return fmt.Sprintf(`server: {host: 127.0.0.1, port: %d}
admin:
  host: 127.0.0.1
  port: %d
  tokens:
    - {name: root, group: admin, token: %s}
    - {name: viewer, group: user, token: %s}
  access:
    list: [admin, user]
    read: [admin, user]
templates:
  dir: %s
control:
  socket: %s
`, serverPort, adminPort, dashboardToken, viewerToken,
		strconv.Quote(filepath.Join(dir, "templates")), strconv.Quote(filepath.Join(dir, "doppel.sock")))
}

// countersDoc has one proxy, shop, whose mock orders fails the first two
// attempts of each Idempotency-Key, and whose own loss fails every
// second forwarded request sending X-Chaos: on. The admin token may do
// anything; viewer (group user) may list and read, not update.
func countersDoc(dir string, serverPort, adminPort int, upstream string) string {
	return accessDocHead(dir, serverPort, adminPort) + fmt.Sprintf(`proxies:
  - name: shop
    type: http
    url: %s
    loss:
      percentage: 1.0
      status: 502
      when: {headers: {X-Chaos: "^on$"}, count: {every: 2}}
    mocks:
      - name: orders
        request: {method: POST, url: "^/orders$"}
        response: {status: 201, json: '{"created": true}'}
        proxy:
          loss:
            percentage: 1.0
            status: 503
            when: {count: {first: 2}, per: {header: Idempotency-Key}}
`, upstream)
}

// The proxy page shows the counters of its faults' when after the fault
// cards, refreshes them, and resets them; a caller who may not update
// sees them and cannot reset. Run inside TestDashboardInABrowser, in its
// browser (so that make screenshots takes its picture), against a Doppel
// of its own with a read-only token.
func testCounters(t *testing.T, other *browser) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "upstream")
	}))
	defer upstream.Close()
	dir := t.TempDir()
	ports := freePorts(t, 2)
	cfg := writeFile(t, dir, "main.yaml", countersDoc(dir, ports[0], ports[1], upstream.URL))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	p.waitServing()
	base := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	proxyBase := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	waitListening(t, p, "127.0.0.1:"+strconv.Itoa(ports[1]))

	// send is one request through the proxy listener; it returns the status.
	send := func(method, path string, header ...string) int {
		t.Helper()
		req, _ := http.NewRequest(method, proxyBase+path, strings.NewReader("{}"))
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	var got []int
	for _, key := range []string{"order-7", "order-7", "order-7", "order-8"} {
		got = append(got, send("POST", "/orders", "Idempotency-Key", key))
	}
	got = append(got, send("POST", "/orders")) // no key: counted under ""
	got = append(got, send("GET", "/things", "X-Chaos", "on"), send("GET", "/things", "X-Chaos", "on"))
	if fmt.Sprint(got) != "[503 503 201 503 503 200 502]" {
		t.Fatalf("the statuses the client got: %v", got)
	}

	// apiCounters is what the API lists, as "fault mock key count" lines.
	apiCounters := func(t *testing.T) []string {
		t.Helper()
		status, body := adminCall(t, base, "GET", "/api/v1/proxies/shop/counters", "")
		if status != 200 {
			t.Fatalf("GET counters: %d %v", status, body)
		}
		var out []string
		for _, c := range body["counters"].([]any) {
			c := c.(map[string]any)
			mock, _ := c["mock"].(string)
			out = append(out, fmt.Sprintf("%v %s %q %v", c["fault"], mock, c["key"], c["count"]))
		}
		return out
	}
	if got := strings.Join(apiCounters(t), ", "); got != `loss orders "order-7" 3, loss orders "order-8" 1, loss orders "" 1, loss  "" 2` {
		t.Fatalf("the API's counters before the page: %s", got)
	}

	// The same tab on another origin: its own localStorage, light theme.
	b := &browser{t: t, ctx: other.ctx, base: base, shot: other.shot, locale: other.locale}
	b.do("opening the second Doppel", chromedp.Navigate(base+"/robots.txt"))
	eval[bool](b, "localStorage.setItem('doppel.theme', 'light'), true")
	keep := func(token string) {
		eval[bool](b, "localStorage.setItem('doppel.token', JSON.stringify({value: '"+token+"', expires: Date.now() + 3600000})), true")
	}
	// rows is the table as the page shows it: one "fault|mock|key|count" per row.
	rows := func() []string {
		return eval[[]string](b, "[...document.querySelectorAll('#counters-body tr')].map((r) => [...r.cells].slice(0, 4).map((c) => c.textContent).join('|'))")
	}
	loaded := "document.getElementById('counters') && document.getElementById('counters').getAttribute('aria-busy') === 'false'"

	t.Run("the table", func(t *testing.T) {
		b.t = t
		keep(dashboardToken)
		b.open("/proxies/shop")
		b.wait("the counters", loaded+" && document.querySelectorAll('#counters-body tr').length === 4")
		if got := strings.Join(rows(), ", "); got != "loss|orders|order-7|3, loss|orders|order-8|1, loss|orders|(no Idempotency-Key header)|1, loss|proxy|(whole proxy)|2" {
			t.Errorf("the rows: %s", got)
		}
		// First seen: a local time, the UTC time in the tooltip; when the
		// section fetched, in the same clock.
		_, body := adminCall(t, base, "GET", "/api/v1/proxies/shop/counters", "")
		first := body["counters"].([]any)[0].(map[string]any)["first_seen"].(string)
		seen, err := time.Parse(time.RFC3339Nano, first)
		if err != nil {
			t.Fatal(err)
		}
		times := b.checkTimes()
		if got := eval[string](b, "document.querySelector('#counters-body tr').cells[4].querySelector('time').getAttribute('datetime')"); got != seen.UTC().Format("2006-01-02T15:04:05.000Z") {
			t.Errorf("first seen is drawn for %s, want %s", got, first)
		}
		if s := eval[string](b, "document.getElementById('counters-fetched').textContent"); s != "Fetched "+timeIn(b, times, "counters-fetched").Text {
			t.Errorf("the section says %q", s)
		}
		// Another locale, another clock: the browser's own, never a fixed one.
		b.emulate("en-GB", browserZone)
		b.open("/proxies/shop")
		b.wait("the counters in en-GB", loaded+" && document.querySelectorAll('#counters-body tr').length === 4")
		if n := len(b.checkTimes()); n != 5 {
			t.Errorf("%d times on the page, want 5 (4 first seen, 1 fetched)", n)
		}
		b.emulate(browserLocale, browserZone)
		b.open("/proxies/shop")
		b.wait("the counters", loaded+" && document.querySelectorAll('#counters-body tr').length === 4")
		// Right after the fault cards, before the mocks; outside the form.
		if !eval[bool](b, `(() => { const f = document.getElementById('faults'), c = document.getElementById('counters'), m = document.getElementById('mocks');
			return !!(f && c && m) && !!(f.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING) && !!(c.compareDocumentPosition(m) & Node.DOCUMENT_POSITION_FOLLOWING); })()`) {
			t.Error("the counters are not between the fault cards and the mocks")
		}
		if s := eval[string](b, "document.querySelector('#counters p.hint').textContent"); !strings.Contains(s, "A counter is how many requests") || !strings.Contains(s, "restart when this proxy changes") {
			t.Errorf("the explanation: %q", s)
		}
		for _, id := range []string{"counters-refresh", "counters-reset"} {
			if !eval[bool](b, "(() => { const e = document.getElementById('"+id+"'); return !!e && !e.matches(':disabled') && e.textContent.trim() !== ''; })()") {
				t.Errorf("#%s is missing, disabled or unlabelled for the admin", id)
			}
		}
		// The picture: the last cards above, the counters, the mocks below.
		eval[bool](b, "document.getElementById('counters').scrollIntoView(), window.scrollBy(0, -190), true")
		b.screenshot("counters")
	})

	t.Run("refresh", func(t *testing.T) {
		b.t = t
		send("POST", "/orders", "Idempotency-Key", "order-8")
		b.click("#counters-refresh")
		b.wait("order-8 counted twice", loaded+" && [...document.querySelectorAll('#counters-body tr')].some((r) => r.dataset.key === 'order-8' && r.cells[3].textContent === '2')")
	})

	// A caller who may read but not update sees the counters; Reset is
	// disabled, saying why. One whose right went away after the page
	// opened is refused by the server, and the page says so.
	t.Run("read-only", func(t *testing.T) {
		b.t = t
		keep(viewerToken)
		b.open("/proxies/shop")
		b.wait("the counters", loaded+" && document.querySelectorAll('#counters-body tr').length === 4")
		if got := eval[[]any](b, "(() => { const r = document.getElementById('counters-reset'); return [r.matches(':disabled'), r.title, document.getElementById('counters-refresh').matches(':disabled')]; })()"); got[0] != true ||
			got[1] != "Token viewer may not update this proxy" || got[2] != false {
			t.Errorf("for viewer, Reset (disabled, title) and Refresh (disabled): %v", got)
		}
		if s := eval[string](b, "document.getElementById('counters-readonly').checkVisibility() ? document.getElementById('counters-readonly').textContent : ''"); s != "Reset counters: Token viewer may not update this proxy." {
			t.Errorf("the read-only note: %q", s)
		}
		if !eval[bool](b, "document.getElementById('save').disabled && document.querySelector('[data-path=\"loss.percentage\"]').matches(':disabled')") {
			t.Error("viewer may edit the faults")
		}
		send("POST", "/orders", "Idempotency-Key", "order-7")
		b.click("#counters-refresh")
		b.wait("refreshed: order-7 counted four times", loaded+" && [...document.querySelectorAll('#counters-body tr')].some((r) => r.dataset.key === 'order-7' && r.cells[3].textContent === '4')")

		keep(dashboardToken)
		b.open("/proxies/shop")
		b.wait("Reset offered to the admin", loaded+" && !document.getElementById('counters-reset').disabled")
		keep(viewerToken) // as if another tab had signed in as viewer
		b.click("#counters-reset")
		b.wait("the refusal", "document.getElementById('counters-error').checkVisibility()")
		if s := eval[string](b, "document.getElementById('counters-error').textContent"); s != "Not reset: token viewer may not update here" {
			t.Errorf("the refusal says %q", s)
		}
		if n := eval[int](b, "document.querySelectorAll('#counters-body tr').length"); n != 4 {
			t.Errorf("after the refusal the table has %d rows, want 4", n)
		}
		if n := len(apiCounters(t)); n != 4 {
			t.Errorf("the refused reset left %d counters, want 4", n)
		}
	})

	t.Run("reset", func(t *testing.T) {
		b.t = t
		keep(dashboardToken)
		b.open("/proxies/shop")
		b.wait("the counters", loaded+" && document.querySelectorAll('#counters-body tr').length === 4")
		b.click("#counters-reset")
		b.wait("the emptied table", loaded+" && document.getElementById('counters-empty').checkVisibility() && !document.getElementById('counters-table').checkVisibility()")
		if n := b.requests("DELETE /api/v1/proxies/shop/counters"); n != 1 {
			t.Errorf("%d DELETE requests, want 1", n)
		}
		if s := eval[string](b, "document.getElementById('counters-empty').textContent"); s != "No counters yet: a fault with when.count or when.window counts the requests it admits." {
			t.Errorf("the empty state: %q", s)
		}
		if s := eval[string](b, "document.getElementById('toast').textContent"); s != "Reset the counters of proxy shop" {
			t.Errorf("the toast: %q", s)
		}
		if got := apiCounters(t); len(got) != 0 {
			t.Errorf("after the reset the API lists %v", got)
		}
		// Counting starts again: the first attempts of a key fail again.
		if s := send("POST", "/orders", "Idempotency-Key", "order-7"); s != 503 {
			t.Errorf("order-7 after the reset: %d, want 503", s)
		}
		b.click("#counters-refresh")
		b.wait("counted again", loaded+" && document.querySelectorAll('#counters-body tr').length === 1")
		if got := strings.Join(rows(), ", "); got != "loss|orders|order-7|1" {
			t.Errorf("after the reset and one request: %s", got)
		}
	})

	// A save changes the proxy: its counts restart, and the page shows it.
	t.Run("a save restarts them", func(t *testing.T) {
		b.t = t
		b.set(`[data-path="timeout"]`, "20")
		b.click("#save")
		b.wait("saved, the counters fetched again", "document.getElementById('toast').textContent === 'Saved proxy shop' && "+loaded+" && document.getElementById('counters-empty').checkVisibility()")
		if got := apiCounters(t); len(got) != 0 {
			t.Errorf("after the save the API lists %v", got)
		}
	})

	// In YAML mode the form goes away and the counters stay.
	t.Run("YAML mode", func(t *testing.T) {
		b.t = t
		b.click("#mode")
		b.wait("the YAML", "!document.getElementById('yaml').hidden")
		if !eval[bool](b, "document.getElementById('counters').checkVisibility() && !!(document.getElementById('yaml').compareDocumentPosition(document.getElementById('counters')) & Node.DOCUMENT_POSITION_FOLLOWING)") {
			t.Error("the counters are not shown after the YAML")
		}
		b.click("#mode")
		b.wait("the form", "!document.querySelector('fieldset.plain').hidden && document.getElementById('faults').contains(document.querySelector('.fault'))")
		if !eval[bool](b, "!!(document.getElementById('faults').compareDocumentPosition(document.getElementById('counters')) & Node.DOCUMENT_POSITION_FOLLOWING) && !!(document.getElementById('counters').compareDocumentPosition(document.getElementById('mocks')) & Node.DOCUMENT_POSITION_FOLLOWING)") {
			t.Error("back in the form, the counters are not between the cards and the mocks")
		}
	})

	// A proxy not yet created has no counters to ask for.
	t.Run("new proxy", func(t *testing.T) {
		b.t = t
		b.open("/new")
		b.wait("the form", "document.getElementById('identity') && document.getElementById('faults')")
		if eval[bool](b, "!!document.getElementById('counters')") {
			t.Error("the new-proxy page has a counters section")
		}
		if n := eval[int](b, "window.testRequests.filter((r) => r.key.endsWith('/counters')).length"); n != 0 {
			t.Errorf("the new-proxy page asked for counters %d times", n)
		}
	})

	t.Run("dark theme", func(t *testing.T) {
		b.t = t
		b.open("/proxies/shop")
		send("POST", "/orders", "Idempotency-Key", "order-9")
		b.wait("the counters", loaded)
		b.click("#counters-refresh")
		b.wait("a row", loaded+" && document.querySelectorAll('#counters-body tr').length === 1")
		b.click("#theme")
		if s := eval[string](b, "getComputedStyle(document.getElementById('counters')).backgroundColor + ' ' + getComputedStyle(document.querySelector('#counters-body td')).color"); s != "rgb(29, 33, 40) rgb(230, 233, 239)" {
			t.Errorf("in the dark theme the section is %q, want the dark panel and text", s)
		}
		b.click("#theme")
	})
}
