package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// recordPageDoc has one proxy, shop, forwarding to upstream, with one mock
// of its own (hello). The admin token may do anything; viewer (group
// user) may list and read, not update.
func recordPageDoc(dir string, serverPort, adminPort int, upstream string) string {
	return accessDocHead(dir, serverPort, adminPort) + fmt.Sprintf(`proxies:
  - name: shop
    type: http
    url: %s
    mocks:
      - name: hello
        request: {method: GET, url: "^/hello$"}
        response: {status: 200, json: '{"hello": "world"}'}
`, upstream)
}

// The proxy page's Record from traffic: requests forwarded to a real
// upstream are previewed as mocks (name, method, path regex, status, the
// latency the upstream took), a regex that does not compile and one that
// matches nothing are said so, a stale revision is refused with a reload
// offered, and Add appends the mocks, which then answer in the
// upstream's place. A read-only caller is not offered the button.
func TestDashboardRecordsFromTraffic(t *testing.T) {
	exe := chromium(t)
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.Method + " " + r.URL.Path {
		case "GET /catalog":
			time.Sleep(30 * time.Millisecond) // a latency worth recording
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"items": [1, 2]}`)
		case "POST /orders":
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id": 7}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer upstream.Close()
	dir := t.TempDir()
	ports := freePorts(t, 2)
	cfg := writeFile(t, dir, "main.yaml", recordPageDoc(dir, ports[0], ports[1], upstream.URL))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	p.waitServing()
	base := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	proxyBase := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	waitListening(t, p, "127.0.0.1:"+strconv.Itoa(ports[1]))

	// send is one request through the proxy listener; it returns the
	// status and the body.
	send := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, proxyBase+path, strings.NewReader(`{"item": 1}`))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	var got []int
	for _, r := range [][2]string{{"GET", "/catalog"}, {"GET", "/catalog"}, {"POST", "/orders"}, {"GET", "/missing"}, {"GET", "/hello"}} {
		status, _ := send(r[0], r[1])
		got = append(got, status)
	}
	if fmt.Sprint(got) != "[200 200 201 404 200]" || hits.Load() != 4 {
		t.Fatalf("the statuses the client got: %v, with %d requests upstream (want 4: /hello is mocked)", got, hits.Load())
	}
	// apiMocks are the names of the proxy's mocks, as the API has them.
	apiMocks := func(t *testing.T) ([]string, map[string]any) {
		t.Helper()
		status, body := adminCall(t, base, "GET", "/api/v1/proxies/shop", "")
		if status != 200 {
			t.Fatalf("GET the proxy: %d %v", status, body)
		}
		var names []string
		for _, m := range body["proxy"].(map[string]any)["mocks"].([]any) {
			names = append(names, m.(map[string]any)["name"].(string))
		}
		return names, body
	}

	b := newBrowser(t, exe, base)
	keep := func(token string) {
		eval[bool](b, "localStorage.setItem('doppel.token', JSON.stringify({value: '"+token+"', expires: Date.now() + 3600000})), true")
	}
	loaded := "document.querySelector('[data-path=\"timeout\"]') && document.getElementById('revision').textContent.includes('revision')"
	// rows is the preview as the dialog shows it: one
	// "name|method|path regex|status|latency" per mock.
	rows := func() []string {
		return eval[[]string](b, "[...document.querySelectorAll('#record-body tr')].map((r) => [...r.cells].map((c) => c.textContent).join('|'))")
	}
	shown := func(id string) bool {
		return eval[bool](b, "(() => { const e = document.getElementById('"+id+"'); return !!e && e.checkVisibility(); })()")
	}
	text := func(id string) string { return eval[string](b, "document.getElementById('"+id+"').textContent") }
	previewed := "document.getElementById('record-dialog').getAttribute('aria-busy') === 'false'"
	// preview types the regex and asks for the preview.
	preview := func(match string) {
		b.t.Helper()
		b.set("#record-match", match)
		before := b.requests("POST /api/v1/proxies/shop/record")
		b.click("#record-preview")
		b.wait("the preview", previewed+" && window.testRequests.filter((r) => r.key === 'POST /api/v1/proxies/shop/record' && r.done).length > "+strconv.Itoa(before))
	}
	// lastBody is what the page sent with its last recording request.
	lastBody := func() map[string]any {
		b.t.Helper()
		var out map[string]any
		raw := eval[string](b, "window.testRequests.filter((r) => r.key === 'POST /api/v1/proxies/shop/record').at(-1).body")
		if err := json.Unmarshal([]byte(raw), &out); err != nil {
			b.t.Fatalf("the body sent: %s: %v", raw, err)
		}
		return out
	}

	t.Run("read-only: no button", func(t *testing.T) {
		b.t = t
		keep(viewerToken)
		b.open("/proxies/shop")
		b.wait("the page", loaded)
		if eval[bool](b, "!!document.getElementById('record') || !!document.getElementById('record-dialog')") {
			t.Error("viewer, who may not update shop, is offered Record from traffic")
		}
		if !eval[bool](b, "document.getElementById('save').disabled") {
			t.Error("viewer may save")
		}
	})

	var catalogLatency string
	t.Run("preview", func(t *testing.T) {
		b.t = t
		keep(dashboardToken)
		b.open("/proxies/shop")
		b.wait("the button", loaded+" && document.getElementById('record')")
		if s := eval[string](b, "[...document.querySelector('.head').children].map((e) => e.textContent).join('|')"); s != "Proxy shop|Record from traffic|Edit as YAML|Delete|Save" {
			t.Errorf("the page's head: %s", s)
		}
		b.click("#record")
		b.wait("the dialog", "document.getElementById('record-dialog').open && document.activeElement === document.getElementById('record-match')")
		if shown("record-result") || shown("record-apply") {
			t.Error("the dialog shows a result or Add before any preview")
		}
		preview("")
		if body := lastBody(); len(body) != 1 || body["apply"] != false {
			t.Errorf("the preview sent %v, want {apply: false}", body)
		}
		r := rows()
		if len(r) != 3 {
			t.Fatalf("the preview lists %v, want 3 mocks", r)
		}
		// Sorted by path; the mocked /hello is not recorded.
		for i, want := range []string{`rec-get-catalog|GET|^/catalog$|200|`, `rec-get-missing|GET|^/missing$|404|`, `rec-post-orders|POST|^/orders$|201|`} {
			if !strings.HasPrefix(r[i], want) {
				t.Errorf("row %d: %q, want it to start %q", i, r[i], want)
			}
		}
		// Every mock shows its latency, the fast answers' too.
		for _, row := range r {
			if !regexp.MustCompile(`\|\d\.\d{1,4}(–\d\.\d{1,4})? s$`).MatchString(row) {
				t.Errorf("row %q shows no latency", row)
			}
		}
		// The two requests to /catalog each took 30 ms upstream at least.
		catalogLatency = r[0][strings.LastIndex(r[0], "|")+1:]
		m := regexp.MustCompile(`^(0\.\d{1,4})(?:–(0\.\d{1,4}))? s$`).FindStringSubmatch(catalogLatency)
		if m == nil {
			t.Fatalf("the latency of rec-get-catalog: %q", catalogLatency)
		}
		if low, _ := strconv.ParseFloat(m[1], 64); low < 0.03 {
			t.Errorf("the latency of rec-get-catalog starts at %v s, under the 30 ms the upstream took", low)
		}
		if s := text("record-summary"); s != "3 mocks from 4 forwarded exchanges, added after this proxy's 1 mock (the first that matches answers):" {
			t.Errorf("the summary: %q", s)
		}
		if shown("record-message") || shown("record-error") || shown("record-unsaved") {
			t.Error("a message, an error or the unsaved-edits warning is shown")
		}
		if s := text("record-apply"); !shown("record-apply") || s != "Add these 3 mocks" {
			t.Errorf("Add (shown %v): %q", shown("record-apply"), s)
		}
		if names, _ := apiMocks(t); strings.Join(names, ",") != "hello" {
			t.Errorf("the preview changed the proxy: %v", names)
		}
		// Editing the regex makes the preview stale: Add goes.
		b.set("#record-match", "^/cat")
		if shown("record-apply") || shown("record-result") {
			t.Error("after the regex changed, the old preview and Add are still shown")
		}
		b.click("#record-close")
		b.wait("the dialog closed", "!document.getElementById('record-dialog').open")
	})

	t.Run("a regex that does not compile", func(t *testing.T) {
		b.t = t
		b.click("#record")
		preview("(")
		if s := text("record-error"); !shown("record-error") || !strings.HasPrefix(s, "Not previewed: match: not a regular expression") {
			t.Errorf("the refusal (shown %v): %q", shown("record-error"), s)
		}
		if shown("record-apply") || shown("record-result") {
			t.Error("Add or a result is shown with the refusal")
		}
	})

	t.Run("nothing matches", func(t *testing.T) {
		b.t = t
		preview("^/nothing")
		if s := text("record-message"); !shown("record-message") || s != "No forwarded exchange of proxy shop in the journal matches: nothing to record" {
			t.Errorf("the message (shown %v): %q", shown("record-message"), s)
		}
		if shown("record-apply") || shown("record-mocks") || shown("record-error") {
			t.Error("with nothing to record, Add, the table or an error is shown")
		}
		if body := lastBody(); body["match"] != "^/nothing" || body["apply"] != false {
			t.Errorf("the preview sent %v", body)
		}
		b.click("#record-close")
	})

	// Adding reloads the page: an edit not saved is warned of first.
	t.Run("unsaved edits", func(t *testing.T) {
		b.t = t
		b.set(`[data-path="timeout"]`, "44")
		b.click("#record")
		preview("^/catalog")
		if s := text("record-unsaved"); !shown("record-unsaved") || !strings.Contains(s, "discards them") {
			t.Errorf("the warning (shown %v): %q", shown("record-unsaved"), s)
		}
		b.click("#record-close")
		b.open("/proxies/shop")
		b.wait("the page", loaded+" && document.getElementById('record')")
		b.click("#record")
		preview("^/catalog")
		if shown("record-unsaved") {
			t.Error("the warning is shown on a page without edits")
		}
		b.click("#record-close")
	})

	t.Run("a stale revision", func(t *testing.T) {
		b.t = t
		b.click("#record")
		preview("^/catalog")
		if s := text("record-apply"); s != "Add this mock" {
			t.Errorf("Add for one mock: %q", s)
		}
		// Another writer changes shop meanwhile.
		_, body := apiMocks(t)
		doc := body["proxy"].(map[string]any)
		doc["timeout"] = 33
		raw, _ := json.Marshal(map[string]any{"revision": body["revision"], "proxy": doc})
		if status, out := adminCall(t, base, "PUT", "/api/v1/proxies/shop", string(raw)); status != 200 {
			t.Fatalf("the other writer: %d %v", status, out)
		}
		b.click("#record-apply")
		b.wait("the refusal", "document.getElementById('record-error').checkVisibility() && document.getElementById('record-reload')")
		if s := text("record-error"); !strings.HasPrefix(s, "Not added: proxy shop changed since you loaded it; reload to see the current version") {
			t.Errorf("the refusal: %q", s)
		}
		if sent := lastBody(); sent["apply"] != true || sent["revision"] != body["revision"] || sent["match"] != "^/catalog" {
			t.Errorf("Add sent %v, want apply, the page's revision %v and the regex previewed", sent, body["revision"])
		}
		if names, _ := apiMocks(t); strings.Join(names, ",") != "hello" {
			t.Errorf("the refused add changed the proxy: %v", names)
		}
		b.click("#record-reload")
		b.wait("the proxy loaded again", "!document.getElementById('record-dialog').open && document.querySelector('[data-path=\"timeout\"]').value === '33'")
	})

	t.Run("add", func(t *testing.T) {
		b.t = t
		_, before := apiMocks(t)
		b.click("#record")
		preview("")
		eval[bool](b, "document.getElementById('record-match').blur(), true")
		b.screenshot("record")
		// The answer comes late: meanwhile Escape does not close the dialog.
		eval[bool](b, "window.testDelays['POST /api/v1/proxies/shop/record'] = 500, true")
		b.click("#record-apply")
		b.do("pressing Escape", chromedp.KeyEvent(kb.Escape))
		if !eval[bool](b, "document.getElementById('record-dialog').open && document.getElementById('record-close').disabled && document.getElementById('record-apply').disabled") {
			t.Error("while adding, the dialog closed or its buttons are not disabled")
		}
		b.wait("the page loaded again with the mocks", "document.getElementById('toast').textContent === 'Added 3 recorded mocks to proxy shop' && "+loaded+
			" && document.querySelector('[data-path=\"mocks[3].name\"]') && !document.getElementById('record-dialog').open")
		if sent := lastBody(); sent["apply"] != true || sent["revision"] != before["revision"] || sent["match"] != nil {
			t.Errorf("Add sent %v, want apply and revision %v", sent, before["revision"])
		}
		names, after := apiMocks(t)
		if strings.Join(names, ",") != "hello,rec-get-catalog,rec-get-missing,rec-post-orders" {
			t.Fatalf("the proxy's mocks after Add: %v", names)
		}
		page := eval[[]string](b, "[0, 1, 2, 3].map((i) => document.querySelector('[data-path=\"mocks[' + i + '].name\"]').value)")
		if strings.Join(page, ",") != strings.Join(names, ",") {
			t.Errorf("the page shows the mocks %v, the API %v", page, names)
		}
		if s := eval[string](b, "document.getElementById('revision').textContent"); !strings.Contains(s, after["revision"].(string)) {
			t.Errorf("the page holds %q, not the new revision %v", s, after["revision"])
		}
		catalog := after["proxy"].(map[string]any)["mocks"].([]any)[1].(map[string]any)
		if res := catalog["response"].(map[string]any); res["json"] != `{"items": [1, 2]}` || res["status"] != 200.0 {
			t.Errorf("rec-get-catalog answers %v", res)
		}
		l := catalog["proxy"].(map[string]any)["latency"].(map[string]any)
		want := fmt.Sprintf("%v–%v s", l["min"], l["max"])
		if l["min"] == l["max"] {
			want = fmt.Sprintf("%v s", l["min"])
		}
		if catalogLatency != want {
			t.Errorf("the preview showed a latency of %q, the mock has %v", catalogLatency, l)
		}
		// The recorded mocks answer in the upstream's place.
		upstreamBefore := hits.Load()
		if status, body := send("POST", "/orders"); status != 201 || body != `{"id": 7}` {
			t.Errorf("POST /orders after Add: %d %q", status, body)
		}
		if hits.Load() != upstreamBefore {
			t.Error("POST /orders still reached the upstream")
		}
	})

	t.Run("dark theme", func(t *testing.T) {
		b.t = t
		b.click("#theme")
		b.click("#record")
		preview("^/orders")
		if s := eval[string](b, "getComputedStyle(document.getElementById('record-dialog')).backgroundColor + ' ' + getComputedStyle(document.querySelector('#record-body td')).color + ' ' + getComputedStyle(document.querySelector('#record-mocks th')).backgroundColor"); s != "rgb(29, 33, 40) rgb(230, 233, 239) rgb(29, 33, 40)" {
			t.Errorf("in the dark theme the dialog is %q, want the dark panel and text", s)
		}
		// The journal still holds the exchanges before the mocks: a second
		// recording names its mocks apart.
		if r := rows(); len(r) != 1 || !strings.HasPrefix(r[0], "rec-post-orders-2|POST|") {
			t.Errorf("recording again: %v", r)
		}
		b.click("#record-close")
		b.click("#theme")
	})
}
