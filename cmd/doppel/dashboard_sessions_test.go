package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// sessionsDoc has two proxies, shop and pay, that no request reaches
// here. The admin token may do anything; viewer (group user) may list
// and read, not update.
func sessionsDoc(dir string, serverPort, adminPort int) string {
	return accessDocHead(dir, serverPort, adminPort) + `proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9
  - name: pay
    type: http
    url: http://127.0.0.1:9
    resolve: {type: header, header: X-Backend}
`
}

const (
	// suiteA lays a loss and a mock over shop and a latency over pay.
	suiteA = `{"id": "suite-a", "ttl": 600, "proxies": {
		"shop": {"loss": {"percentage": 1.0, "status": 503},
		         "mocks": [{"name": "down", "request": {"method": "GET", "url": "^/catalog$"}, "response": {"status": 503, "body": "down for suite-a"}}]},
		"pay": {"latency": {"percentage": 1.0, "min": 0.2, "max": 0.4}}}}`
	// suiteB lives three seconds.
	suiteB = `{"id": "suite-b", "ttl": 3, "proxies": {"shop": {"abort": {"percentage": 0.5, "at": "request"}}}}`
)

// The sessions page lists the live sessions with their proxies, expiry
// and a countdown, shows what one lays over each proxy, ends one after
// asking, follows expiry and refreshes by itself; a read-only caller sees
// them and cannot end one. Run inside TestDashboardInABrowser, in its
// browser (so that make screenshots takes its picture), against a Doppel
// of its own with a read-only token.
func testSessions(t *testing.T, other *browser) {
	dir := t.TempDir()
	ports := freePorts(t, 2)
	cfg := writeFile(t, dir, "main.yaml", sessionsDoc(dir, ports[0], ports[1]))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	p.waitServing()
	base := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	waitListening(t, p, "127.0.0.1:"+strconv.Itoa(ports[1]))

	create := func(t *testing.T, body string) map[string]any {
		t.Helper()
		status, out := adminCall(t, base, "POST", "/api/v1/sessions", body)
		if status != 201 {
			t.Fatalf("POST /api/v1/sessions: %d %v", status, out)
		}
		return out
	}
	apiStatus := func(t *testing.T, id string) int {
		t.Helper()
		status, _ := adminCall(t, base, "GET", "/api/v1/sessions/"+id, "")
		return status
	}

	b := &browser{t: t, ctx: other.ctx, base: base, shot: other.shot, locale: other.locale}
	b.do("opening the Doppel of the sessions", chromedp.Navigate(base+"/robots.txt"))
	eval[bool](b, "localStorage.setItem('doppel.theme', 'light'), true")
	keep := func(token string) {
		eval[bool](b, "localStorage.setItem('doppel.token', JSON.stringify({value: '"+token+"', expires: Date.now() + 3600000})), true")
	}
	// refreshEvery sets how often the page fetches the list by itself.
	refreshEvery := func(ms int) {
		eval[bool](b, "localStorage.setItem('doppel.sessions-refresh-ms', '"+strconv.Itoa(ms)+"'), true")
	}
	// rows is the table as the page shows it: one "id|proxies|ttl" per row.
	rows := func() []string {
		return eval[[]string](b, "[...document.querySelectorAll('#sessions-body tr')].map((r) => [r.dataset.id, [...r.cells[1].querySelectorAll('.tag')].map((x) => x.textContent).join(','), r.cells[3].textContent].join('|'))")
	}
	loaded := "document.getElementById('sessions-fetched') && document.getElementById('sessions-fetched').textContent !== ''"
	rowCSS := func(id string) string { return `#sessions-body tr[data-id="` + id + `"]` }
	row := func(id string) string {
		return "document.querySelector('" + strings.ReplaceAll(rowCSS(id), `"`, `\"`) + "')"
	}
	errorText := "(document.getElementById('sessions-error').checkVisibility() ? document.getElementById('sessions-error').textContent : '')"

	t.Run("navigation and the empty state", func(t *testing.T) {
		b.t = t
		keep(dashboardToken)
		refreshEvery(60000)
		b.open("/")
		b.wait("the list", "document.querySelectorAll('#proxies tbody tr').length === 2")
		b.click(`nav a[data-route="sessions"]`)
		b.wait("the empty state", "location.pathname === '/sessions' && document.getElementById('sessions-empty') && document.getElementById('sessions-empty').checkVisibility()")
		if !eval[bool](b, "document.querySelector('nav a[data-route=\"sessions\"]').classList.contains('current')") {
			t.Error("Sessions is not marked as the page in force")
		}
		if eval[bool](b, "document.getElementById('sessions').checkVisibility()") {
			t.Error("an empty table is shown")
		}
		s := eval[string](b, "document.getElementById('sessions-empty').textContent")
		for _, want := range []string{"No live sessions.", "X-Doppel-Session", "docs/sessions.md", "applies only to requests carrying its id"} {
			if !strings.Contains(s, want) {
				t.Errorf("the empty state lacks %q: %q", want, s)
			}
		}
		// The curl it offers is one line, and it creates a session.
		line := eval[string](b, "document.getElementById('sessions-create').textContent")
		if strings.Contains(line, "\n") || !strings.HasPrefix(line, "curl -s -H \"X-Proxy-Authorization: Bearer $TOKEN\" "+base+"/api/v1/sessions -d '") {
			t.Fatalf("the curl line: %q", line)
		}
		cmd := exec.Command("sh", "-c", line)
		cmd.Env = append(os.Environ(), "TOKEN="+dashboardToken)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		m := regexp.MustCompile(`"id":"([^"]+)"`).FindSubmatch(out)
		if m == nil || !strings.Contains(string(out), `"ttl":300`) {
			t.Fatalf("the curl line answered %s", out)
		}
		if status, _ := adminCall(t, base, "DELETE", "/api/v1/sessions/"+string(m[1]), ""); status != 204 {
			t.Fatalf("ending the session the curl line made: %d", status)
		}
	})

	t.Run("the table", func(t *testing.T) {
		b.t = t
		a := create(t, suiteA)
		create(t, suiteB)
		b.click("#sessions-refresh")
		b.wait("two rows", "document.querySelectorAll('#sessions-body tr').length === 2")
		// Soonest to expire first; the proxies sorted; the ttl in seconds.
		if got := strings.Join(rows(), ", "); got != "suite-b|shop|3 s, suite-a|pay,shop|600 s" {
			t.Errorf("the rows: %s", got)
		}
		if eval[bool](b, "document.getElementById('sessions-empty').checkVisibility()") {
			t.Error("the empty state is still shown")
		}
		// Expires: the local time, the UTC time in the tooltip, a countdown.
		expires := a["expires_at"].(string)
		at, err := time.Parse(time.RFC3339Nano, expires)
		if err != nil {
			t.Fatal(err)
		}
		times := b.checkTimes()
		if got := eval[string](b, row("suite-a")+".querySelector('time.expires-at').getAttribute('datetime')"); got != at.UTC().Format("2006-01-02T15:04:05.000Z") {
			t.Errorf("the expiry is drawn for %s, want %s", got, expires)
		}
		if s := eval[string](b, "document.getElementById('sessions-fetched').textContent"); s != "Fetched "+timeIn(b, times, "sessions-fetched").Text {
			t.Errorf("the page says %q", s)
		}
		countdown := func(id string) string {
			return eval[string](b, row(id)+".querySelector('.countdown').textContent")
		}
		if s := countdown("suite-a"); !regexp.MustCompile(`^in (9 min [1-5]?\d|10 min 0) s$`).MatchString(s) {
			t.Errorf("suite-a's countdown: %q", s)
		}
		if s := countdown("suite-b"); !regexp.MustCompile(`^in [123] s$`).MatchString(s) {
			t.Errorf("suite-b's countdown: %q", s)
		}
		// It counts down by itself, every second.
		first := countdown("suite-a")
		b.wait("the countdown to move", row("suite-a")+".querySelector('.countdown').textContent !== "+strconv.Quote(first))
		for _, sel := range []string{row("suite-a") + ".querySelector('button.end')", row("suite-a") + ".querySelector('button.view')", "document.getElementById('sessions-refresh')"} {
			if !eval[bool](b, "(() => { const e = "+sel+"; return !!e && !e.disabled && e.textContent.trim() !== ''; })()") {
				t.Errorf("%s is missing, disabled or unlabelled for the admin", sel)
			}
		}
	})

	// suite-b runs out: the countdown says expired, End goes, and the next
	// fetch has it gone.
	t.Run("expiry", func(t *testing.T) {
		b.t = t
		b.wait("suite-b expired", row("suite-b")+" && "+row("suite-b")+".querySelector('.countdown').textContent === 'expired'")
		if !eval[bool](b, row("suite-b")+".classList.contains('expired') && "+row("suite-b")+".querySelector('button.end').disabled") {
			t.Error("the expired row is not marked, or may still be ended")
		}
		if s := eval[string](b, row("suite-a")+".querySelector('.countdown').textContent"); !strings.HasPrefix(s, "in ") {
			t.Errorf("suite-a says %q", s)
		}
		deadline := time.Now().Add(5 * time.Second)
		for apiStatus(t, "suite-b") != 404 {
			if time.Now().After(deadline) {
				t.Fatal("the API still has suite-b")
			}
			time.Sleep(50 * time.Millisecond)
		}
		b.click("#sessions-refresh")
		b.wait("suite-b gone", "!"+row("suite-b")+" && "+row("suite-a"))
		if got := strings.Join(rows(), ", "); got != "suite-a|pay,shop|600 s" {
			t.Errorf("the rows after the expiry: %s", got)
		}
	})

	// A session that ends on another day has the date before its time.
	t.Run("an expiry tomorrow", func(t *testing.T) {
		b.t = t
		create(t, `{"id": "suite-d", "ttl": 86400, "proxies": {"pay": {"loss": {"percentage": 0.25, "status": 502}}}}`)
		b.click("#sessions-refresh")
		b.wait("suite-d", row("suite-d"))
		b.checkTimes()
		if s := eval[string](b, row("suite-d")+".querySelector('time').textContent"); !regexp.MustCompile(`^\d\d/\d\d/\d{4}, \d{1,2}:\d\d:\d\d [AP]M$`).MatchString(s) {
			t.Errorf("suite-d expires %q, want the date and the time", s)
		}
		if status, _ := adminCall(t, base, "DELETE", "/api/v1/sessions/suite-d", ""); status != 204 {
			t.Fatalf("ending suite-d: %d", status)
		}
	})

	// While the page is open it fetches the list by itself.
	t.Run("refresh by itself", func(t *testing.T) {
		b.t = t
		refreshEvery(500)
		b.open("/sessions")
		b.wait("suite-a", loaded+" && "+row("suite-a"))
		create(t, `{"id": "suite-c", "ttl": 900, "proxies": {"pay": {"loss": {"percentage": 0.25, "status": 502}}}}`)
		b.wait("suite-c, fetched without a click", row("suite-c"))
		if got := strings.Join(rows(), ", "); got != "suite-a|pay,shop|600 s, suite-c|pay|900 s" {
			t.Errorf("the rows: %s", got)
		}
		refreshEvery(60000)
		// Not on another page: leaving stops it.
		b.open("/")
		b.wait("the list", "document.querySelectorAll('#proxies tbody tr').length === 2")
		before := b.requests("GET /api/v1/sessions")
		time.Sleep(1200 * time.Millisecond)
		if n := b.requests("GET /api/v1/sessions") - before; n != 0 {
			t.Errorf("the proxy list asked for the sessions %d times", n)
		}
	})

	t.Run("what a session lays over", func(t *testing.T) {
		b.t = t
		b.open("/sessions")
		b.wait("two rows", loaded+" && document.querySelectorAll('#sessions-body tr').length === 2")
		b.click(`#sessions-body tr[data-id="suite-a"] td.id`)
		b.wait("the overlay", "document.getElementById('session-detail').checkVisibility() && document.getElementById('session-detail').getAttribute('aria-busy') === 'false'")
		if s := eval[string](b, "document.querySelector('#session-detail h2').textContent"); s != "Session suite-a" {
			t.Errorf("the detail's title: %q", s)
		}
		if got := eval[[]string](b, "[...document.querySelectorAll('#session-detail .overlay')].map((o) => o.dataset.proxy + ': ' + o.querySelector('h3').textContent)"); strings.Join(got, ", ") != "pay: pay, shop: shop" {
			t.Errorf("the overlays: %v", got)
		}
		shop := eval[string](b, "document.querySelector('#session-detail .overlay[data-proxy=shop] pre').textContent")
		for _, want := range []string{"loss:\n  percentage: 1\n  status: 503", "mocks:\n  - name: down", "body: down for suite-a", "url: ^/catalog$"} {
			if !strings.Contains(shop, want) {
				t.Errorf("shop's overlay lacks %q:\n%s", want, shop)
			}
		}
		if pay := eval[string](b, "document.querySelector('#session-detail .overlay[data-proxy=pay] pre').textContent"); pay != "latency:\n  percentage: 1\n  min: 0.2\n  max: 0.4" {
			t.Errorf("pay's overlay:\n%s", pay)
		}
		if s := eval[string](b, "document.querySelector('#session-detail p.muted').textContent"); !strings.Contains(s, "X-Doppel-Session: suite-a") || !strings.Contains(s, "ttl 600 s") {
			t.Errorf("the detail's line: %q", s)
		}
		if e := timeIn(b, b.checkTimes(), "session-detail"); e.Datetime != eval[string](b, row("suite-a")+".querySelector('time').getAttribute('datetime')") {
			t.Errorf("the detail's expiry is %s, not the row's", e.Datetime)
		}
		if !eval[bool](b, row("suite-a")+".classList.contains('selected')") {
			t.Error("the row shown is not marked")
		}
		b.screenshot("sessions")
		b.click("#session-close")
		if eval[bool](b, "document.getElementById('session-detail').checkVisibility()") {
			t.Error("Close left the detail")
		}
	})

	t.Run("end", func(t *testing.T) {
		b.t = t
		b.click(rowCSS("suite-c") + " button.end")
		// Not window.confirm: the dashboard's dialog.
		b.wait("the confirmation", "document.getElementById('confirm-dialog').open")
		if s := eval[string](b, "[document.getElementById('confirm-title').textContent, document.getElementById('confirm-text').textContent, document.getElementById('confirm-list').textContent, document.getElementById('confirm-ok').textContent].join(' | ')"); s != "End session suite-c? | Its mocks and faults stop applying now: requests carrying X-Doppel-Session: suite-c are served as the proxy is configured. It lays over: | pay | End session" {
			t.Errorf("the confirmation: %q", s)
		}
		b.click("#confirm-cancel")
		if n := b.requests("DELETE /api/v1/sessions/suite-c"); n != 0 || apiStatus(t, "suite-c") != 200 {
			t.Fatalf("cancel ended it (%d DELETE)", n)
		}
		b.click(rowCSS("suite-c") + " button.end")
		b.wait("the confirmation", "document.getElementById('confirm-dialog').open")
		b.click("#confirm-ok")
		b.wait("suite-c gone", "!"+row("suite-c")+" && document.getElementById('toast').textContent === 'Ended session suite-c'")
		if n := b.requests("DELETE /api/v1/sessions/suite-c"); n != 1 {
			t.Errorf("%d DELETE requests, want 1", n)
		}
		if s := apiStatus(t, "suite-c"); s != 404 {
			t.Errorf("the API answers %d for the ended session, want 404", s)
		}
		if got := strings.Join(rows(), ", "); got != "suite-a|pay,shop|600 s" {
			t.Errorf("the rows after the end: %s", got)
		}
		b.click("#sessions-refresh")
		b.wait("fetched again", loaded+" && document.querySelectorAll('#sessions-body tr').length === 1")

		// The delete dialog of a proxy still says Delete.
		b.open("/")
		b.wait("the list", "document.querySelectorAll('#proxies tbody tr').length === 2")
		b.click("tr[data-proxy=shop] button.danger")
		b.wait("the confirmation", "document.getElementById('confirm-dialog').open && document.getElementById('confirm-title').textContent === 'Delete proxy shop?'")
		if s := eval[string](b, "document.getElementById('confirm-ok').textContent"); s != "Delete" {
			t.Errorf("the proxy's delete button says %q", s)
		}
		b.click("#confirm-cancel")
	})

	// A proxy's page says how many live sessions lay over it.
	t.Run("on the proxy page", func(t *testing.T) {
		b.t = t
		b.open("/proxies/shop")
		b.wait("the note", "document.getElementById('proxy-sessions') && document.getElementById('proxy-sessions').checkVisibility()")
		if s := eval[string](b, "document.getElementById('proxy-sessions').textContent"); s != "1 live session lays its own mocks and faults over this proxy, for the requests that carry its id: see Sessions." {
			t.Errorf("the note: %q", s)
		}
		create(t, `{"id": "suite-d", "ttl": 900, "proxies": {"shop": {}}}`)
		b.open("/proxies/shop")
		b.wait("two", "document.getElementById('proxy-sessions') && document.getElementById('proxy-sessions').textContent.startsWith('2 live sessions lay')")
		b.open("/proxies/pay")
		// Drawn once the page's sessions call is done: waiting for every
		// such call to be done held for an empty list too, before the page
		// had made it.
		b.wait("the page", "document.getElementById('save') && window.testRequests.some((r) => r.key === 'GET /api/v1/sessions') && "+
			"window.testRequests.filter((r) => r.key === 'GET /api/v1/sessions').every((r) => r.done) && "+
			"document.getElementById('proxy-sessions') && document.getElementById('proxy-sessions').checkVisibility()")
		if s := eval[string](b, "document.getElementById('proxy-sessions').checkVisibility() ? document.getElementById('proxy-sessions').textContent : ''"); !strings.HasPrefix(s, "1 live session") {
			t.Errorf("pay's note: %q", s)
		}
		if status, _ := adminCall(t, base, "DELETE", "/api/v1/sessions/suite-d", ""); status != 204 {
			t.Fatalf("ending suite-d: %d", status)
		}
		b.click("#proxy-sessions a")
		b.wait("the sessions page", "location.pathname === '/sessions' && "+loaded)
	})

	// Ended elsewhere meanwhile: the End says so and the row goes. A
	// network failure is shown, and the row stays.
	t.Run("already ended, unreachable", func(t *testing.T) {
		b.t = t
		create(t, `{"id": "suite-e", "ttl": 900, "proxies": {"shop": {}}}`)
		b.click("#sessions-refresh")
		b.wait("suite-e", row("suite-e"))
		if status, _ := adminCall(t, base, "DELETE", "/api/v1/sessions/suite-e", ""); status != 204 {
			t.Fatalf("ending suite-e elsewhere: %d", status)
		}
		b.click(rowCSS("suite-e") + " button.end")
		b.wait("the confirmation", "document.getElementById('confirm-dialog').open")
		b.click("#confirm-ok")
		b.wait("the message", errorText+" !== ''")
		if s := eval[string](b, errorText); s != "Session suite-e already ended or expired: nothing to end." {
			t.Errorf("the message: %q", s)
		}
		if eval[bool](b, "!!"+row("suite-e")) {
			t.Error("the ended row stays")
		}

		eval[bool](b, "window.testRealFetch = window.fetch, window.fetch = () => Promise.reject(new TypeError('Failed to fetch')), true")
		b.click(rowCSS("suite-a") + " button.end")
		b.wait("the confirmation", "document.getElementById('confirm-dialog').open")
		b.click("#confirm-ok")
		b.wait("the message", errorText+".startsWith('Not ended')")
		eval[bool](b, "window.fetch = window.testRealFetch, true")
		if s := eval[string](b, errorText); s != "Not ended: Doppel did not answer: Failed to fetch" {
			t.Errorf("the message: %q", s)
		}
		if !eval[bool](b, "!!"+row("suite-a")) || apiStatus(t, "suite-a") != 200 {
			t.Error("suite-a went")
		}
	})

	// viewer may list and read: it sees the sessions and their overlays,
	// End is disabled saying why, and one the server refuses all the same
	// is shown with its message.
	t.Run("read-only", func(t *testing.T) {
		b.t = t
		keep(viewerToken)
		b.open("/sessions")
		b.wait("suite-a", loaded+" && "+row("suite-a"))
		if got := eval[[]any](b, "(() => { const e = "+row("suite-a")+".querySelector('button.end'); return [e.disabled, e.title]; })()"); got[0] != true || got[1] != "Token viewer may not update proxy pay" {
			t.Errorf("for viewer, End (disabled, title): %v", got)
		}
		if s := eval[string](b, "document.getElementById('sessions-readonly').checkVisibility() ? document.getElementById('sessions-readonly').textContent : ''"); s != "End: Token viewer may not update proxy pay." {
			t.Errorf("the read-only note: %q", s)
		}
		b.click(rowCSS("suite-a") + " button.view")
		b.wait("the overlay", "document.querySelectorAll('#session-detail .overlay').length === 2")

		keep(dashboardToken)
		b.open("/sessions")
		b.wait("End offered to the admin", loaded+" && "+row("suite-a")+" && !"+row("suite-a")+".querySelector('button.end').disabled")
		keep(viewerToken) // as if another tab had signed in as viewer
		b.click(rowCSS("suite-a") + " button.end")
		b.wait("the confirmation", "document.getElementById('confirm-dialog').open")
		b.click("#confirm-ok")
		b.wait("the refusal", errorText+" !== ''")
		if s := eval[string](b, errorText); s != "Not ended: token viewer may not update here" {
			t.Errorf("the refusal says %q", s)
		}
		if !eval[bool](b, "!!"+row("suite-a")) {
			t.Error("the refused session left the table")
		}
		if s := apiStatus(t, "suite-a"); s != 200 {
			t.Errorf("the refused end: the API answers %d", s)
		}
		keep(dashboardToken)
	})

	// A caller who may not list sees why, and nothing is asked.
	t.Run("anonymous", func(t *testing.T) {
		b.t = t
		eval[bool](b, "localStorage.removeItem('doppel.token'), sessionStorage.setItem('doppel.anonymous', '1'), true")
		b.open("/sessions")
		b.wait("the refusal", "document.getElementById('sessions-refused')")
		if s := eval[string](b, "document.getElementById('sessions-refused').textContent"); !strings.HasPrefix(s, "The sessions are not shown: Needs a token that may list") {
			t.Errorf("the refusal: %q", s)
		}
		if n := b.requests("GET /api/v1/sessions"); n != 0 {
			t.Errorf("asked for the sessions %d times", n)
		}
		keep(dashboardToken)
	})

	t.Run("dark theme", func(t *testing.T) {
		b.t = t
		b.open("/sessions")
		b.wait("suite-a", loaded+" && "+row("suite-a"))
		b.click("#theme")
		if s := eval[string](b, "getComputedStyle(document.querySelector('.panel.scroll')).backgroundColor + ' ' + getComputedStyle("+row("suite-a")+".cells[0]).color"); s != "rgb(29, 33, 40) rgb(230, 233, 239)" {
			t.Errorf("in the dark theme the table is %q, want the dark panel and text", s)
		}
		b.click("#theme")
	})
}
