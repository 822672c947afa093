package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The dashboard in a real headless Chromium against the real binary.
// Without Chromium the test skips, except under CI (the variable CI set),
// where it fails: CI installs it (.ci/run). DOPPEL_SCREENSHOTS=1 writes a
// picture of each page to docs/dashboard/.

const dashboardToken = "d0d0d0d0-1111-4111-8111-d0d0d0d0d0d0"

// chromium finds the browser: $CHROMIUM, else the usual names.
func chromium(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("Chromium is not installed, and CI is set: the dashboard tests must run here (apt-get install chromium)")
	}
	t.Skip("Chromium is not installed: the dashboard's browser tests are skipped (apt-get install chromium to run them)")
	return ""
}

// dashboardDoc lets anyone list and read, and only the admin token write.
func dashboardDoc(dir string, serverPort, adminPort int) string {
	return fmt.Sprintf(`server: {host: 127.0.0.1, port: %d}
admin:
  host: 127.0.0.1
  port: %d
  title: "Doppel <staging>"
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
  - name: zeta
    type: http
    url: http://127.0.0.1:9001
    loss: {percentage: 0.1, status: 503}
    mocks:
      - {name: from-file, request: {method: GET, url: "^/f$"}, response: {status: 200, template: answer.json.j2}}
      - name: hello
        request: {method: GET, url: "^/hello/(?P<who>[a-z]+)$"}
        response: {status: 200, json: '{"hello": "{{ who }}"}', headers: {X-Mocked: "yes"}}
  - name: alpha
    type: http
    url: https://user:secret@api.example.com/v2/
    resolve: {type: header, header: X-Backend}
    latency: {percentage: 0.25, min: 0.1, max: 0.5}
`, serverPort, adminPort, dashboardToken, strconv.Quote(filepath.Join(dir, "templates")), strconv.Quote(filepath.Join(dir, "doppel.sock")))
}

// adminCall is one request to the admin API with the admin token.
func adminCall(t *testing.T, base, method, path, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("X-Proxy-Authorization", "Bearer "+dashboardToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

type browser struct {
	t      *testing.T
	ctx    context.Context
	base   string
	shot   string // where screenshots go; "" for none
	locale string // the tab's locale, browserLocale unless emulate changed it
}

// do runs the actions with a deadline, failing the test with what.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v\npage: %s", what, err, b.text())
	}
}

// wait polls a JavaScript condition until it holds.
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting for %s: %v\npage: %s", what, err, b.text())
	}
}

// eval runs JavaScript in the page and returns its value.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// text is what the page shows, for failure messages.
func (b *browser) text() string {
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("location.pathname + '\\n' + document.body.innerText"))
	return s
}

func (b *browser) open(path string) {
	b.t.Helper()
	b.do("opening "+path, chromedp.Navigate(b.base+path))
}

// set types a value into the field at selector as a user would: the
// field's own input event runs its check.
func (b *browser) set(selector, value string) {
	b.t.Helper()
	sel, _ := json.Marshal(selector)
	val, _ := json.Marshal(value)
	ok := eval[bool](b, `(() => { const e = document.querySelector(`+string(sel)+`); if (!e) return false;
		e.focus(); e.value = `+string(val)+`; e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`)
	if !ok {
		b.t.Fatalf("no field %s\npage: %s", selector, b.text())
	}
}

func (b *browser) click(selector string) {
	b.t.Helper()
	b.do("clicking "+selector, chromedp.WaitVisible(chromedp.CSS(selector)), chromedp.Click(chromedp.CSS(selector)))
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	if b.shot == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	// Two frames: what the last step changed is painted.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))", chromedp.EvalAwaitPromise)); err != nil {
		b.t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shot, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// pageProbe runs in every document the tab loads, before the page's own
// files. It hands each Content-Security-Policy violation to the test
// (cspViolation, exposed below), and wraps fetch: every request is
// listed in window.testRequests ("METHOD /path", its body, whether its
// answer has come), and one
// named in window.testDelays waits that many milliseconds first.
const pageProbe = `(() => {
  document.addEventListener('securitypolicyviolation', (e) => {
    window.cspViolation(location.pathname + ': ' + e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline') + ' at ' + e.sourceFile + ':' + e.lineNumber);
  });
  window.testRequests = [];
  window.testDelays = {};
  const real = window.fetch;
  window.fetch = async (input, init = {}) => {
    const url = new URL(input instanceof Request ? input.url : input, location.href);
    const key = (init.method || 'GET').toUpperCase() + ' ' + url.pathname;
    const entry = { key, body: init.body === undefined ? null : String(init.body), done: false };
    window.testRequests.push(entry);
    const delay = window.testDelays[key];
    if (delay) {
      await new Promise((r) => setTimeout(r, delay));
    }
    try {
      return await real(input, init);
    } finally {
      entry.done = true;
    }
  };
})();`

// requests counts the page's requests of one kind, such as "GET /api/v1/proxies".
func (b *browser) requests(key string) int {
	b.t.Helper()
	k, _ := json.Marshal(key)
	return eval[int](b, "window.testRequests.filter((r) => r.key === "+string(k)+").length")
}

// visibility makes the page believe it is hidden or shown, and tells it.
func (b *browser) visibility(state string) {
	b.t.Helper()
	eval[bool](b, `Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => '`+state+`' }),
		document.dispatchEvent(new Event('visibilitychange')), true`)
}

// newBrowser starts headless Chromium on the dashboard at base, in the
// light theme, in browserLocale and browserZone. Every page it loads is
// watched: any Content-Security-Policy violation fails the test when it
// ends.
func newBrowser(t *testing.T, exe, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1280, 860),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	// The first run starts the browser, tied to the context it is given:
	// the long-lived one, not a step's deadline.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	b := &browser{t: t, ctx: ctx, base: base}
	if os.Getenv("DOPPEL_SCREENSHOTS") != "" {
		b.shot = repoPath(t, "docs/dashboard")
		if err := os.MkdirAll(b.shot, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var violations []string
	b.do("watching the page",
		chromedp.ExposeFunc("cspViolation", func(_ context.Context, v string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			violations = append(violations, v)
			return true, nil
		}),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			var added struct {
				Identifier string `json:"identifier"`
			}
			return t.Call(ctx, "Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": pageProbe}, &added)
		}))
	// The page must run under its policy without tripping it once.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if len(violations) > 0 {
			t.Errorf("the page violated its Content-Security-Policy:\n%s", strings.Join(violations, "\n"))
		}
	})
	b.emulate(browserLocale, browserZone)
	// Light theme whatever the host prefers; the dark one is asked for below.
	b.do("starting the browser", chromedp.Navigate(base+"/robots.txt"))
	eval[bool](b, "localStorage.setItem('doppel.theme', 'light'), true")
	return b
}

func TestDashboardInABrowser(t *testing.T) {
	exe := chromium(t)
	dir := t.TempDir()
	ports := freePorts(t, 2)
	cfg := writeFile(t, dir, "main.yaml", dashboardDoc(dir, ports[0], ports[1]))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	p.waitServing()
	base := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	waitListening(t, p, "127.0.0.1:"+strconv.Itoa(ports[1]))
	if status, _ := adminCall(t, base, "PUT", "/api/v1/proxies/zeta/templates/answer.json.j2", `{"answer": 42}`); status != 204 {
		t.Fatalf("uploading the template: %d", status)
	}

	b := newBrowser(t, exe, base)

	t.Run("anonymous read-only view", func(t *testing.T) {
		b.t = t
		b.open("/")
		// Writes need a token: the page asks for one, and can go on without.
		b.wait("the token dialog", "document.getElementById('token-dialog').open")
		b.screenshot("token-dialog")
		b.click("#token-anonymous")
		b.wait("the list", "document.querySelectorAll('#proxies tbody tr').length === 2")
		rows := eval[[]string](b, "[...document.querySelectorAll('#proxies tbody tr')].map((r) => r.dataset.proxy)")
		if strings.Join(rows, ",") != "zeta,alpha" {
			t.Errorf("rows: %v", rows)
		}
		if eval[string](b, "document.getElementById('caller').textContent") != "No token" {
			t.Error("the caller is not shown as anonymous")
		}
		// What the server would refuse is disabled, with the reason.
		newTitle := eval[string](b, "(() => { const e = document.getElementById('new-proxy'); return e.disabled ? e.title : ''; })()")
		if !strings.Contains(newTitle, "Needs a token") {
			t.Errorf("New proxy is not disabled with a reason: %q", newTitle)
		}
		if n := eval[int](b, "[...document.querySelectorAll('#proxies button.danger')].filter((e) => e.disabled && e.title).length"); n != 2 {
			t.Errorf("%d delete buttons disabled with a reason, want 2", n)
		}
		// The upstream is shown without its credentials.
		if s := eval[string](b, "document.querySelector('tr[data-proxy=alpha]').textContent"); strings.Contains(s, "secret") || !strings.Contains(s, "api.example.com") ||
			!strings.Contains(s, "header X-Backend") || !strings.Contains(s, "latency 0.25 (25%) 0.1–0.5 s") {
			t.Errorf("alpha's row: %q", s)
		}
		if s := eval[string](b, "document.querySelector('tr[data-proxy=zeta]').textContent"); !strings.Contains(s, "loss 0.1 (10%) → 503") || !strings.Contains(s, "default") {
			t.Errorf("zeta's row: %q", s)
		}
		// When it fetched: the browser's clock, the UTC time on hover.
		times := b.checkTimes()
		if s := eval[string](b, "document.getElementById('refreshed').textContent"); s != "Fetched "+timeIn(b, times, "refreshed").Text {
			t.Errorf("the list says %q", s)
		}
		b.click("tr[data-proxy=zeta] a")
		b.wait("the form", "document.querySelector('[data-path=\"url\"]')")
		if !eval[bool](b, "document.getElementById('save').disabled && document.querySelector('[data-path=\"url\"]').matches(':disabled')") {
			t.Error("an anonymous caller can edit")
		}
	})

	t.Run("token", func(t *testing.T) {
		b.t = t
		b.click("#token-open")
		b.do("typing a wrong token", chromedp.SendKeys(chromedp.CSS("#token-input"), "ffffffff-0000-4000-8000-ffffffffffff"), chromedp.Click(chromedp.CSS("#token-use")))
		b.wait("the refusal", "document.getElementById('token-error').textContent.includes('does not know')")
		b.set("#token-input", "")
		b.do("typing the token", chromedp.SendKeys(chromedp.CSS("#token-input"), dashboardToken), chromedp.Click(chromedp.CSS("#token-use")))
		b.wait("signed in", "document.getElementById('caller').textContent === 'Token root (admin)'")
		left := eval[float64](b, "JSON.parse(localStorage.getItem('doppel.token')).expires - Date.now()")
		if left < 59*60*1000 || left > 60*60*1000 {
			t.Errorf("the token is kept for %v ms, want one hour", left)
		}
		// An expired token is forgotten.
		eval[bool](b, "localStorage.setItem('doppel.token', JSON.stringify({value: 'x', expires: Date.now() - 1})), true")
		b.open("/")
		b.wait("the expired token forgotten", "document.getElementById('caller').textContent === 'No token' && localStorage.getItem('doppel.token') === null")
		eval[bool](b, "localStorage.setItem('doppel.token', JSON.stringify({value: '"+dashboardToken+"', expires: Date.now() + 3600000})), true")
		b.open("/")
		b.wait("signed in again", "document.getElementById('caller').textContent === 'Token root (admin)'")
		if strings.Contains(p.stdout()+p.stderr.String(), dashboardToken) {
			t.Error("the token reached the log")
		}
	})

	// A kept token that stops working is forgotten and another asked for:
	// one the server does not know, one that expires while the page is
	// open, one refused with a 401 on a save (the edit stays on the page).
	t.Run("token lapses", func(t *testing.T) {
		b.t = t
		unknown := "ffffffff-0000-4000-8000-ffffffffffff"
		keep := func(value, expires string) {
			eval[bool](b, "localStorage.setItem('doppel.token', JSON.stringify({value: '"+value+"', expires: "+expires+"})), true")
		}
		signIn := func() {
			b.do("typing the token", chromedp.SendKeys(chromedp.CSS("#token-input"), dashboardToken), chromedp.Click(chromedp.CSS("#token-use")))
			b.wait("signed in", "!document.getElementById('token-dialog').open && document.getElementById('caller').textContent === 'Token root (admin)'")
		}
		keep(unknown, "Date.now() + 3600000")
		b.open("/")
		b.wait("the unknown token forgotten", "document.getElementById('token-dialog').open && document.getElementById('token-reason').textContent.includes('no longer knows')"+
			" && localStorage.getItem('doppel.token') === null && document.getElementById('caller').textContent === 'No token'")
		signIn()

		keep(dashboardToken, "Date.now() + 1500")
		b.open("/")
		b.wait("signed in for a moment", "document.getElementById('caller').textContent === 'Token root (admin)' && !document.getElementById('token-dialog').open")
		b.wait("the expired token forgotten", "document.getElementById('token-dialog').open && document.getElementById('token-reason').textContent.includes('expired')"+
			" && localStorage.getItem('doppel.token') === null && document.getElementById('caller').textContent === 'No token'")
		signIn()

		b.open("/proxies/zeta")
		b.wait("the form", "document.querySelector('[data-path=\"timeout\"]') && !document.getElementById('save').disabled")
		keep(unknown, "Date.now() + 3600000") // as if the server had dropped the token meanwhile
		b.set(`[data-path="timeout"]`, "31")
		b.click("#save")
		// The page and the API say the same of it: Doppel does not know it.
		b.wait("the refused token forgotten", "document.getElementById('token-dialog').open && document.getElementById('token-reason').textContent.includes('does not know the token kept')"+
			" && localStorage.getItem('doppel.token') === null && document.getElementById('banner').textContent.includes('Not saved: Doppel does not know the token sent in X-Proxy-Authorization')")
		b.wait("the caller shown as anonymous", "document.getElementById('caller').textContent === 'No token'")
		signIn()
		if v := eval[string](b, "document.querySelector('[data-path=\"timeout\"]').value"); v != "31" {
			t.Fatalf("the edit is lost after signing in again: timeout %q", v)
		}
		b.click("#save")
		b.wait("saved", "document.getElementById('toast').textContent === 'Saved proxy zeta'")
		if _, body := adminCall(t, base, "GET", "/api/v1/proxies/zeta", ""); body["proxy"].(map[string]any)["timeout"] != 31.0 {
			t.Fatalf("the edit is not stored: %v", body)
		}
	})

	t.Run("list", func(t *testing.T) {
		b.t = t
		b.open("/")
		b.wait("the list", "document.querySelectorAll('#proxies tbody tr').length === 2 && !document.getElementById('new-proxy').disabled")
		if s := eval[string](b, "document.querySelector('tr[data-proxy=zeta] td.num').textContent"); s != "2" {
			t.Errorf("zeta's mock count: %q", s)
		}
		if s := eval[string](b, "document.title + '|' + document.getElementById('brand').textContent"); s != "Doppel <staging>|Doppel <staging>" {
			t.Errorf("the title: %q", s)
		}
		b.screenshot("list")
	})

	// A page whose answer comes late draws nothing once the address has
	// changed: the last address asked for is the page shown.
	t.Run("a slow page does not draw over the next", func(t *testing.T) {
		b.t = t
		b.open("/")
		b.wait("the list", "document.querySelectorAll('#proxies tbody tr').length === 2")
		eval[bool](b, "window.testDelays['GET /api/v1/proxies/zeta'] = 800, window.testDelays['GET /api/v1/status'] = 800, true")
		b.click("tr[data-proxy=zeta] a")
		b.wait("asked for zeta", "location.pathname === '/proxies/zeta'")
		b.click(`nav a[data-route="status"]`)
		b.wait("asked for the status", "location.pathname === '/status'")
		b.click(`nav a[data-route=""]`)
		b.wait("the list", "location.pathname === '/' && document.querySelectorAll('#proxies tbody tr').length === 2")
		b.wait("the slow answers in", "window.testRequests.some((r) => r.key === 'GET /api/v1/status') && window.testRequests.every((r) => r.done)")
		time.Sleep(200 * time.Millisecond) // and whatever they would draw is drawn
		if s := eval[string](b, "location.pathname + ' ' + document.querySelector('main h1').textContent"); s != "/ Proxies" {
			t.Errorf("after going to zeta, the status and back to the list, the page shows %q", s)
		}
	})

	// The list refetches on a timer (a minute; shortened here), one timer
	// however the page was reached, stopped while the tab is hidden and
	// when the page is left.
	t.Run("refetch every minute, paused while hidden", func(t *testing.T) {
		b.t = t
		const list = "GET /api/v1/proxies"
		eval[bool](b, "localStorage.setItem('doppel.refresh-ms', '300'), true")
		b.open("/")
		b.wait("the list", "document.querySelectorAll('#proxies tbody tr').length === 2")
		// Two loads of the list at once, each answered late.
		eval[bool](b, "window.testDelays['"+list+"'] = 150, document.querySelector('nav a[data-route=\"\"]').click(), document.querySelector('nav a[data-route=\"\"]').click(), true")
		time.Sleep(400 * time.Millisecond)
		eval[bool](b, "delete window.testDelays['"+list+"'], true")
		before := b.requests(list)
		time.Sleep(1500 * time.Millisecond)
		if n := b.requests(list) - before; n < 2 || n > 7 {
			t.Errorf("%d fetches of the list in 1.5 s at one every 0.3 s", n)
		}
		b.visibility("hidden")
		time.Sleep(100 * time.Millisecond) // a fetch under way may land
		hidden := b.requests(list)
		time.Sleep(1000 * time.Millisecond)
		if n := b.requests(list) - hidden; n != 0 {
			t.Errorf("%d fetches of the list while the tab is hidden", n)
		}
		b.visibility("visible")
		b.wait("fetched when shown again, then every 0.3 s", "window.testRequests.filter((r) => r.key === '"+list+"').length >= "+strconv.Itoa(hidden+3))
		b.click(`nav a[data-route="status"]`)
		b.wait("the status", "document.getElementById('status-count')")
		time.Sleep(100 * time.Millisecond)
		left := b.requests(list)
		time.Sleep(800 * time.Millisecond)
		if n := b.requests(list) - left; n != 0 {
			t.Errorf("%d fetches of the list after leaving it", n)
		}
		eval[bool](b, "localStorage.removeItem('doppel.refresh-ms'), true")
		b.open("/")
		b.wait("the list", "document.querySelectorAll('#proxies tbody tr').length === 2 && !document.getElementById('new-proxy').disabled")
	})

	t.Run("create", func(t *testing.T) {
		b.t = t
		b.click("#new-proxy")
		b.wait("the empty form", "location.pathname === '/new' && document.querySelector('[data-path=\"name\"]')")
		// Checked as typed against the schema.
		b.set(`[data-path="name"]`, "x")
		b.wait("the name refused", "document.querySelector('[data-path=\"name\"]').getAttribute('aria-invalid') === 'true'")
		if msg := eval[string](b, "document.getElementById(document.querySelector('[data-path=\"name\"]').getAttribute('aria-describedby')).textContent"); msg != "At least 2 characters." {
			t.Errorf("the name's message: %q", msg)
		}
		b.set(`[data-path="name"]`, "fresh")
		b.set(`[data-path="url"]`, "http://127.0.0.1:9009/base")
		b.set(`[data-path="resolve.type"]`, "header")
		b.set(`[data-path="resolve.header"]`, "X-Fresh")
		b.wait("the form valid", "!document.querySelector('[aria-invalid=\"true\"]')")
		asked := b.requests("GET /api/v1/access")
		b.click("#save")
		b.wait("the new proxy's page", "location.pathname === '/proxies/fresh' && document.getElementById('revision').textContent.includes('revision')")
		// What the caller may do with the new proxy is asked again.
		if b.requests("GET /api/v1/access") <= asked {
			t.Error("the access report is not fetched again after a create")
		}
		if status, body := adminCall(t, base, "GET", "/api/v1/proxies/fresh", ""); status != 200 || body["proxy"].(map[string]any)["url"] != "http://127.0.0.1:9009/base" {
			t.Fatalf("the created proxy: %d %v", status, body)
		}
	})

	t.Run("edit", func(t *testing.T) {
		b.t = t
		b.set(`[data-path="timeout"]`, "abc")
		b.wait("the timeout refused", "document.querySelector('[data-path=\"timeout\"]').getAttribute('aria-invalid') === 'true'")
		b.set(`[data-path="timeout"]`, "9999")
		b.wait("the timeout bounded", "document.getElementById(document.querySelector('[data-path=\"timeout\"]').getAttribute('aria-describedby')).textContent === 'At most 3600.'")
		b.click("#save")
		b.wait("the save refused before sending", "document.getElementById('banner').textContent.includes('needs fixing')")
		b.set(`[data-path="timeout"]`, "12")
		b.click("#save")
		b.wait("saved", "document.getElementById('toast').textContent === 'Saved proxy fresh'")
		if _, body := adminCall(t, base, "GET", "/api/v1/proxies/fresh", ""); body["proxy"].(map[string]any)["timeout"] != 12.0 {
			t.Fatalf("the edit is not stored: %v", body)
		}
	})

	t.Run("rename", func(t *testing.T) {
		b.t = t
		b.set(`[data-path="name"]`, "renamed")
		b.click("#save")
		b.wait("the renamed proxy's page", "location.pathname === '/proxies/renamed' && document.querySelector('h1').textContent === 'Proxy renamed'")
		if status, _ := adminCall(t, base, "GET", "/api/v1/proxies/fresh", ""); status != 404 {
			t.Errorf("the old name: %d", status)
		}
		if status, _ := adminCall(t, base, "GET", "/api/v1/proxies/renamed", ""); status != 200 {
			t.Errorf("the new name: %d", status)
		}
	})

	t.Run("yaml edit", func(t *testing.T) {
		b.t = t
		b.click("#mode")
		b.wait("the YAML", "document.getElementById('yaml').value.includes('timeout: 12')")
		b.set("#yaml", eval[string](b, "document.getElementById('yaml').value.replace('timeout: 12', 'timeout: 45')"))
		b.screenshot("yaml")
		b.click("#save")
		b.wait("saved", "document.getElementById('toast').textContent === 'Saved proxy renamed' && document.getElementById('yaml').value.includes('timeout: 45')")
		if _, body := adminCall(t, base, "GET", "/api/v1/proxies/renamed", ""); body["proxy"].(map[string]any)["timeout"] != 45.0 {
			t.Fatalf("the YAML edit is not stored: %v", body)
		}
		// A YAML that does not parse is refused in the page.
		b.set("#yaml", "name: [unclosed")
		b.click("#save")
		b.wait("the parse error", "document.getElementById('banner').textContent.includes('does not parse')")
		// A document the server refuses shows its message.
		b.set("#yaml", "name: renamed\ntype: http\nurl: http://127.0.0.1:9009/base\nresolve: {type: header, header: X-Fresh}\ntimeout: 0\n")
		b.click("#save")
		b.wait("the server's refusal", "document.getElementById('banner').textContent.includes('refused') && document.getElementById('banner').textContent.includes('timeout')")
	})

	// The YAML mode reads YAML as JSON would have it (a date stays text),
	// does not switch to a form that would drop what it has no field for,
	// and sends the envelope: a document whose top-level key is proxy is
	// a document, not the envelope.
	t.Run("yaml: JSON types, unknown keys, the envelope", func(t *testing.T) {
		b.t = t
		b.open("/proxies/renamed")
		b.wait("the form", "document.querySelector('[data-path=\"timeout\"]') && document.querySelector('[data-path=\"timeout\"]').value === '45'")
		b.click("#mode")
		b.wait("the YAML", "document.getElementById('yaml').value.includes('timeout: 45')")
		loaded := eval[string](b, "document.getElementById('yaml').value")
		if strings.Contains(loaded, "\nheaders:") || strings.Contains(loaded, "colour") {
			t.Fatalf("unexpected YAML:\n%s", loaded)
		}
		withDate := loaded + "headers:\n  X-Date: 2024-01-01\n"
		b.set("#yaml", withDate)
		b.click("#save")
		b.wait("saved", "document.getElementById('toast').textContent === 'Saved proxy renamed' && document.getElementById('yaml').value.includes('X-Date')")
		_, body := adminCall(t, base, "GET", "/api/v1/proxies/renamed", "")
		if h, _ := body["proxy"].(map[string]any)["headers"].(map[string]any); h["X-Date"] != "2024-01-01" {
			t.Errorf("the header is stored as %v, want the text 2024-01-01", h["X-Date"])
		}
		put := eval[string](b, "window.testRequests.filter((r) => r.key === 'PUT /api/v1/proxies/renamed').at(-1).body")
		var sent map[string]any
		if err := json.Unmarshal([]byte(put), &sent); err != nil || len(sent) != 2 || sent["revision"] == nil || sent["proxy"] == nil {
			t.Errorf("the save did not send {revision, proxy}: %s", put)
		}

		current := eval[string](b, "document.getElementById('yaml').value")
		b.set("#yaml", current+"colour: blue\nmocks:\n  - {name: m, request: {url: x, shade: dark}, response: {status: 200}}\n")
		b.click("#mode")
		b.wait("the switch refused", "document.getElementById('banner').textContent.includes('no field')")
		if s := eval[string](b, "document.getElementById('banner').textContent"); !strings.Contains(s, "colour") || !strings.Contains(s, "mocks[0].request.shade") {
			t.Errorf("the refusal does not name the unknown keys: %q", s)
		}
		if !eval[bool](b, "!document.getElementById('yaml').hidden && document.getElementById('mode').textContent === 'Edit as form'") {
			t.Error("the page left the YAML mode")
		}
		b.set("#yaml", current)
		b.click("#mode")
		b.wait("the form", "!document.querySelector('fieldset.plain').hidden && [...document.querySelectorAll('[data-path=\"headers\"] input')].some((e) => e.value === '2024-01-01')")

		b.click("#mode")
		b.wait("the YAML", "!document.getElementById('yaml').hidden")
		b.set("#yaml", "proxy:\n  name: renamed\n  type: http\n  url: http://127.0.0.1:9009/elsewhere\n  resolve: {type: header, header: X-Fresh}\n  timeout: 45\n")
		b.click("#save")
		b.wait("the server's refusal", "document.getElementById('banner').textContent.includes('refused')")
		if _, body := adminCall(t, base, "GET", "/api/v1/proxies/renamed", ""); body["proxy"].(map[string]any)["url"] != "http://127.0.0.1:9009/base" {
			t.Fatalf("a document with a proxy key was taken for the envelope: %v", body)
		}
	})

	t.Run("stale save is refused", func(t *testing.T) {
		b.t = t
		b.open("/proxies/renamed")
		b.wait("the form", "document.querySelector('[data-path=\"timeout\"]') && document.querySelector('[data-path=\"timeout\"]').value === '45'")
		// Someone else changes it meanwhile.
		_, body := adminCall(t, base, "GET", "/api/v1/proxies/renamed", "")
		doc := body["proxy"].(map[string]any)
		doc["timeout"] = 50
		raw, _ := json.Marshal(doc)
		if status, _ := adminCall(t, base, "PUT", "/api/v1/proxies/renamed", string(raw), "If-Match", body["revision"].(string)); status != 200 {
			t.Fatalf("the other writer: %d", status)
		}
		b.set(`[data-path="timeout"]`, "60")
		b.click("#save")
		b.wait("the mismatch", "document.getElementById('banner').textContent.includes('changed since you loaded it; reload to see the current version')")
		if _, body := adminCall(t, base, "GET", "/api/v1/proxies/renamed", ""); body["proxy"].(map[string]any)["timeout"] != 50.0 {
			t.Fatalf("the stale save overwrote: %v", body)
		}
		b.click("#reload-proxy")
		b.wait("the current version", "document.querySelector('[data-path=\"timeout\"]').value === '50'")
	})

	t.Run("form", func(t *testing.T) {
		b.t = t
		b.open("/proxies/zeta")
		b.wait("the mocks", "document.querySelectorAll('fieldset.item').length === 2")
		if v := eval[string](b, "document.querySelector('[data-path=\"mocks[1].response.json\"]').value"); v != `{"hello": "{{ who }}"}` {
			t.Errorf("the mock's template: %q", v)
		}
		b.screenshot("form")
		eval[bool](b, "document.querySelector('fieldset.item').scrollIntoView(), window.scrollBy(0, -16), true")
		b.screenshot("form-mocks")
	})

	// A document the schema lets through but a cross-field rule refuses
	// (V16: mock names are unique; V21: an inline template parses): each
	// violation sits beside the field its path names, the first is
	// focused, and the banner only sums up.
	t.Run("server violations on fields", func(t *testing.T) {
		b.t = t
		b.open("/proxies/zeta")
		b.wait("the mocks", "document.querySelectorAll('fieldset.item').length === 2")
		msg := func(path string) string {
			return eval[string](b, "document.getElementById(document.querySelector('[data-path=\""+path+"\"]').getAttribute('aria-describedby')).textContent")
		}
		b.set(`[data-path="mocks[1].name"]`, "from-file")
		b.set(`[data-path="mocks[1].response.json"]`, `{"hello": "{{ who "}`)
		b.wait("the form valid", "!document.querySelector('[aria-invalid=\"true\"]')")
		b.click("#save")
		b.wait("the refusal", "document.getElementById('banner').textContent.includes('refused')")
		b.wait("the messages beside the fields", "document.querySelectorAll('[aria-invalid=\"true\"]').length === 2")
		// Beside a field of zeta's own form, the message does not name zeta.
		if m := msg("mocks[1].name"); !strings.Contains(m, "duplicate mock name") || strings.Contains(m, "proxy `zeta`") {
			t.Errorf("beside mocks[1].name: %q", m)
		}
		if m := msg("mocks[1].response.json"); !strings.Contains(m, "does not parse") {
			t.Errorf("beside mocks[1].response.json: %q", m)
		}
		if m := msg("mocks[0].name"); m != "" {
			t.Errorf("beside mocks[0].name: %q", m)
		}
		if banner := eval[string](b, "document.getElementById('banner').textContent"); !strings.Contains(banner, "2 fields need fixing") || strings.Contains(banner, "duplicate") || strings.Contains(banner, "does not parse") {
			t.Errorf("the banner: %q", banner)
		}
		if focused := eval[string](b, "document.activeElement.dataset.path || ''"); focused != "mocks[1].name" {
			t.Errorf("focused: %q, want mocks[1].name", focused)
		}
		// Editing a field clears its server message, and only its own.
		b.set(`[data-path="mocks[1].name"]`, "hello")
		if m := msg("mocks[1].name"); m != "" {
			t.Errorf("beside mocks[1].name after the edit: %q", m)
		}
		if m := msg("mocks[1].response.json"); !strings.Contains(m, "does not parse") {
			t.Errorf("beside mocks[1].response.json after editing the name: %q", m)
		}
		if status, body := adminCall(t, base, "GET", "/api/v1/proxies/zeta", ""); status != 200 || len(body["proxy"].(map[string]any)["mocks"].([]any)) != 2 {
			t.Fatalf("zeta after the refused save: %d %v", status, body)
		}
	})

	t.Run("fault cards", func(t *testing.T) {
		testFaultCards(t, b, base)
	})

	t.Run("counters", func(t *testing.T) {
		testCounters(t, b)
	})

	t.Run("sessions", func(t *testing.T) {
		testSessions(t, b)
	})

	// The list remembers each proxy's revision: a delete after someone
	// else changed it is refused, and nothing goes.
	t.Run("stale delete is refused", func(t *testing.T) {
		b.t = t
		b.open("/")
		b.wait("the list", "document.querySelectorAll('#proxies tbody tr').length === 3")
		_, body := adminCall(t, base, "GET", "/api/v1/proxies/zeta", "")
		doc := body["proxy"].(map[string]any)
		doc["timeout"] = 33
		raw, _ := json.Marshal(map[string]any{"revision": body["revision"], "proxy": doc})
		if status, _ := adminCall(t, base, "PUT", "/api/v1/proxies/zeta", string(raw)); status != 200 {
			t.Fatalf("the other writer: %d", status)
		}
		b.click("tr[data-proxy=zeta] button.danger")
		b.wait("the confirmation", "document.getElementById('confirm-dialog').open && document.getElementById('confirm-list').textContent.includes('answer.json.j2')")
		b.click("#confirm-ok")
		b.wait("the refusal", "document.getElementById('toast').textContent === 'Not deleted: proxy zeta changed since you loaded it; reload to see the current version.'")
		if status, _ := adminCall(t, base, "GET", "/api/v1/proxies/zeta", ""); status != 200 {
			t.Fatalf("the stale delete deleted: %d", status)
		}
		if _, err := os.Stat(filepath.Join(dir, "templates", "zeta", "answer.json.j2")); err != nil {
			t.Errorf("its template file: %v", err)
		}
	})

	t.Run("delete", func(t *testing.T) {
		b.t = t
		b.open("/")
		b.wait("the list", "document.querySelectorAll('#proxies tbody tr').length === 3")
		b.click("tr[data-proxy=zeta] button.danger")
		b.wait("the confirmation", "document.getElementById('confirm-dialog').open && document.getElementById('confirm-list').textContent.includes('answer.json.j2')")
		if s := eval[string](b, "document.getElementById('confirm-title').textContent + ' ' + document.getElementById('confirm-text').textContent"); !strings.Contains(s, "Delete proxy zeta?") || !strings.Contains(s, "1 template file") && !strings.Contains(s, "template file:") {
			t.Errorf("the confirmation: %q", s)
		}
		b.screenshot("delete")
		// Cancel keeps it.
		b.click("#confirm-cancel")
		if status, _ := adminCall(t, base, "GET", "/api/v1/proxies/zeta", ""); status != 200 {
			t.Fatalf("cancel deleted: %d", status)
		}
		b.click("tr[data-proxy=zeta] button.danger")
		b.wait("the confirmation", "document.getElementById('confirm-dialog').open && document.getElementById('confirm-list').textContent.includes('answer.json.j2')")
		b.click("#confirm-ok")
		b.wait("the list without zeta", "document.querySelectorAll('#proxies tbody tr').length === 2 && !document.querySelector('tr[data-proxy=zeta]')")
		if status, _ := adminCall(t, base, "GET", "/api/v1/proxies/zeta", ""); status != 404 {
			t.Errorf("zeta is still there: %d", status)
		}
		if _, err := os.Stat(filepath.Join(dir, "templates", "zeta", "answer.json.j2")); !os.IsNotExist(err) {
			t.Errorf("its template file is still there: %v", err)
		}
	})

	t.Run("status and reload", func(t *testing.T) {
		b.t = t
		b.click(`nav a[data-route="status"]`)
		b.wait("the status", "location.pathname === '/status' && document.getElementById('status-count')")
		if s := eval[string](b, "document.getElementById('status-count').textContent"); s != "2" {
			t.Errorf("proxies in force: %q", s)
		}
		_, st := adminCall(t, base, "GET", "/api/v1/status", "")
		if s := eval[string](b, "document.getElementById('status-revision').textContent"); s != st["revision"] {
			t.Errorf("revision %q, the API says %v", s, st["revision"])
		}
		if !eval[bool](b, "!!document.querySelector('a[href=\"/swagger-ui/\"]')") {
			t.Error("no link to Swagger UI")
		}
		if s := eval[string](b, "document.querySelector('#status-replicas tbody').innerText"); !strings.Contains(s, st["replica"].(string)+" (this one)") || !strings.Contains(s, "live") {
			t.Errorf("the replicas of a file store instance: %q", s)
		}
		b.screenshot("status")
		// A proxy added to the file behind Doppel's back is in force after the reload.
		// The store writes canonical YAML: the new entry goes first in the
		// list, indented as the others are.
		src, _ := os.ReadFile(cfg)
		head, rest, ok := strings.Cut(string(src), "\nproxies:\n")
		if !ok {
			t.Fatalf("no proxies list in\n%s", src)
		}
		indent := rest[:strings.Index(rest, "- ")]
		entry := strings.ReplaceAll(proxyYAML("late", "http://127.0.0.1:9010", "X-Late"), "\n  ", "\n"+indent)
		entry = indent + strings.TrimPrefix(entry, "  ")
		if err := os.WriteFile(cfg, []byte(head+"\nproxies:\n"+entry+rest), 0o644); err != nil {
			t.Fatal(err)
		}
		b.click("#reload")
		b.wait("reloaded", "document.getElementById('toast').textContent.startsWith('Reloaded') && document.getElementById('status-count').textContent === '3'")
		// A client route survives a reload of the page.
		b.do("reloading the page", chromedp.Reload())
		b.wait("the status again", "location.pathname === '/status' && document.getElementById('status-count') && document.getElementById('status-count').textContent === '3'")
	})

	// An address that does not decode is no page, not a failure.
	t.Run("malformed address", func(t *testing.T) {
		b.t = t
		b.open("/proxies/%E0")
		b.wait("not found", "document.querySelector('main h1') && document.querySelector('main h1').textContent === 'Not here'")
		if eval[bool](b, "!!document.getElementById('failure')") {
			t.Error("a malformed address is shown as a failure")
		}
	})

	t.Run("dark theme", func(t *testing.T) {
		b.t = t
		b.open("/")
		b.wait("the list", "document.querySelectorAll('#proxies tbody tr').length === 3")
		b.click("#theme")
		if eval[string](b, "document.documentElement.dataset.theme + ' ' + getComputedStyle(document.body).backgroundColor") != "dark rgb(20, 23, 28)" {
			t.Errorf("the dark theme is not applied")
		}
		b.screenshot("dark")
		b.click("#theme")
	})

	t.Run("sign out", func(t *testing.T) {
		b.t = t
		b.click("#sign-out")
		b.wait("signed out", "document.getElementById('caller').textContent === 'No token' && localStorage.getItem('doppel.token') === null")
		b.wait("writes disabled again", "document.getElementById('new-proxy') && document.getElementById('new-proxy').disabled")
	})
}
