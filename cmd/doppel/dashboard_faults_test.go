package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// paymentsProxy is the proxy the fault cards are tried on: loss, hang and
// latency on (loss with a when, which the cards draw as the generic form
// does), abort and bandwidth off, and a mock with an abort of its own.
const paymentsProxy = `{"proxy": {"name": "payments", "type": "http", "url": "http://127.0.0.1:9011/",
  "resolve": {"type": "header", "header": "X-Fault"},
  "loss": {"percentage": 0.2, "status": 429, "retry_after": 2, "headers": {"X-Why": "quota"}, "when": {"count": {"first": 2}, "per": {"header": "Idempotency-Key"}}},
  "hang": {"percentage": 0.05, "seconds": 30},
  "latency": {"percentage": 0.25, "min": 0.2, "max": 0.5},
  "mocks": [{"name": "refund", "request": {"method": "POST", "url": "^/refunds$"}, "response": {"status": 201, "json": "{\"ok\": true}"},
    "proxy": {"abort": {"percentage": 0.5, "at": "request"}}}]}}`

// stored is the proxy document and revision the admin API holds for name.
func stored(t *testing.T, base, name string) (map[string]any, string) {
	t.Helper()
	status, body := adminCall(t, base, "GET", "/api/v1/proxies/"+name, "")
	if status != 200 {
		t.Fatalf("GET %s: %d %v", name, status, body)
	}
	return body["proxy"].(map[string]any), body["revision"].(string)
}

// sameJSON compares what the API returned with a JSON literal.
func sameJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.Marshal(got)
		t.Errorf("%s: stored %s, want %s", what, g, want)
	}
}

// The proxy page leads with the faults: a card per fault in the order a
// request rolls them, each with a switch (off removes the key), the share
// as the fraction the document holds, its parameters and what the client sees; then the mocks;
// the rest folded under Advanced. Saving is the same compare-and-swap.
// Run inside TestDashboardInABrowser, on its Doppel and browser; it
// leaves no proxy behind.
func testFaultCards(t *testing.T, b *browser, base string) {
	if status, body := adminCall(t, base, "POST", "/api/v1/proxies", paymentsProxy); status != 201 {
		t.Fatalf("creating payments: %d %v", status, body)
	}
	defer func() {
		if status, _ := adminCall(t, base, "DELETE", "/api/v1/proxies/payments", ""); status != 204 && status != 200 {
			t.Errorf("deleting payments: %d", status)
		}
	}()
	eval[bool](b, "localStorage.setItem('doppel.token', JSON.stringify({value: '"+dashboardToken+"', expires: Date.now() + 3600000})), true")
	b.open("/proxies/payments")
	b.wait("the cards", "document.querySelectorAll('#faults .fault').length === 5 && !document.getElementById('save').disabled")
	card := func(kind string) string { return "#faults .fault[data-fault=" + kind + "]" }
	sees := func(sel string) string {
		return eval[string](b, "document.querySelector('"+sel+" .sees-text').textContent")
	}
	visible := func(sel string) bool {
		return eval[bool](b, "(() => { const e = document.querySelector('"+sel+"'); return !!e && e.checkVisibility(); })()")
	}
	_, before := stored(t, base, "payments")

	t.Run("layout", func(t *testing.T) {
		b.t = t
		if got := eval[[]string](b, "[...document.querySelectorAll('#faults .fault')].map((e) => e.dataset.fault)"); strings.Join(got, ",") != "loss,abort,hang,bandwidth,latency" {
			t.Errorf("the cards: %v, want loss, abort, hang, bandwidth, latency", got)
		}
		// The faults, then the mocks, then Advanced; the cards at the top of the page.
		if !eval[bool](b, `(() => { const f = document.querySelector('#faults .fault[data-fault=latency]'), m = document.querySelector('#mocks fieldset.item'), a = document.getElementById('advanced');
			return !!(f && m && a) && !!(f.compareDocumentPosition(m) & Node.DOCUMENT_POSITION_FOLLOWING) && !!(m.compareDocumentPosition(a) & Node.DOCUMENT_POSITION_FOLLOWING); })()`) {
			t.Error("the order is not: fault cards, mocks, Advanced")
		}
		if top := eval[float64](b, "document.querySelector('#faults .fault').getBoundingClientRect().top"); top > 300 {
			t.Errorf("the first card is %v px down the page", top)
		}
		// Advanced is a fold, closed, holding the rest of the document.
		if !eval[bool](b, "document.getElementById('advanced').tagName === 'DETAILS' && !document.getElementById('advanced').open") {
			t.Error("Advanced is not a closed <details>")
		}
		for _, path := range []string{"name", "url", "body_limit", "rewrite_redirects", "rewrite_urls", "timeout", "access", "headers", "resolve", "receipts"} {
			if !eval[bool](b, "document.getElementById('advanced').contains(document.querySelector('[data-path=\""+path+"\"]'))") {
				t.Errorf("%s is not under Advanced", path)
			}
		}
		if visible(`[data-path="timeout"]`) {
			t.Error("timeout is visible while Advanced is closed")
		}
		if !eval[bool](b, "document.getElementById('mocks').contains(document.querySelector('[data-path=\"replace\"]'))") {
			t.Error("replace is not beside the mocks")
		}
		// Each switch is a labelled checkbox with role=switch; every input has a label.
		if got := eval[[]string](b, "[...document.querySelectorAll('#faults .fault-head input')].map((e) => e.type + ' ' + e.getAttribute('role') + ' ' + e.labels[0].textContent + ' ' + e.checked)"); strings.Join(got, ",") !=
			"checkbox switch Loss true,checkbox switch Abort false,checkbox switch Hang true,checkbox switch Bandwidth false,checkbox switch Latency true" {
			t.Errorf("the switches: %v", got)
		}
		if n := eval[int](b, "[...document.querySelectorAll('#faults input, #faults select')].filter((e) => !e.labels.length && !e.getAttribute('aria-label')).length"); n != 0 {
			t.Errorf("%d inputs of the cards have no label", n)
		}
		if visible(`[data-path="abort.at"]`) || !visible(`[data-path="loss.status"]`) {
			t.Error("an off card shows its parameters, or an on card hides them")
		}
		// A share is the fraction the YAML holds, its percentage beside it.
		if v := eval[string](b, "document.querySelector('[data-path=\"loss.percentage\"]').value"); v != "0.2" {
			t.Errorf("loss's share shows %q, want 0.2", v)
		}
		if u := eval[string](b, "document.querySelector('"+card("loss")+" [data-param=percentage] .unit').textContent"); u != "= 20% of requests" {
			t.Errorf("loss's share says %q beside it", u)
		}
		if s := eval[string](b, "document.querySelector('"+card("loss")+" .sees').textContent"); s != "What the client sees in 0.2 (20%) of the requests its when admits: An immediate 429 with the LOSS_INJECTED envelope, Retry-After: 2 and X-Why; the upstream never sees the request." {
			t.Errorf("loss: %q", s)
		}
		if !eval[bool](b, "document.querySelector('[data-path=\"loss.when?\"]').checked && document.querySelector('[data-path=\"loss.when.per.header\"]').value === 'Idempotency-Key'") {
			t.Error("loss's when is not shown")
		}
		if s := sees(card("latency")); s != "A complete answer, late: its headers come 0.2 to 0.5 s after the request, the upstream's own time included." {
			t.Errorf("latency: %q", s)
		}
	})

	t.Run("edit the cards and save", func(t *testing.T) {
		b.t = t
		b.click(card("abort") + " input[role=switch]")
		b.wait("abort on", "document.querySelector('"+card("abort")+"').classList.contains('on')")
		if !visible(`[data-path="abort.at"]`) || visible(`[data-path="abort.after"]`) {
			t.Error("abort at request: at should show and after not")
		}
		if s := sees(card("abort")); s != "No answer: the connection is cut with a TCP reset (ECONNRESET); the upstream never sees the request." {
			t.Errorf("abort at request: %q", s)
		}
		b.set(`[data-path="abort.at"]`, "body")
		if !visible(`[data-path="abort.after"]`) {
			t.Fatal("after is not shown for at: body")
		}
		b.set(`[data-path="abort.after"]`, "1Ki")
		b.set(`[data-path="abort.percentage"]`, "0.125")
		b.set(`[data-path="abort.how"]`, "close")
		if s := sees(card("abort")); s != "The status and headers, then 1 KiB of body, then a FIN (an early end of file)." {
			t.Errorf("abort at body, close: %q", s)
		}
		b.set(`[data-path="abort.how"]`, "reset")
		if s := eval[string](b, "document.querySelector('"+card("abort")+" .sees').textContent"); s != "What the client sees in 0.125 (12.5%) of requests: The status and headers, then 1 KiB of body, then a TCP reset (ECONNRESET)." {
			t.Errorf("abort at body after 1Ki, reset: %q", s)
		}

		b.click(card("hang") + " input[role=switch]")
		b.wait("hang off", "!document.querySelector('"+card("hang")+"').classList.contains('on')")
		if visible(`[data-path="hang.seconds"]`) {
			t.Error("hang's seconds still shown once it is off")
		}

		// A share is a fraction, 0 to 1, checked as typed: a percentage
		// typed there is refused, saying the fraction to type.
		b.set(`[data-path="loss.percentage"]`, "35")
		b.wait("the share refused", "document.querySelector('[data-path=\"loss.percentage\"]').getAttribute('aria-invalid') === 'true'")
		if s := eval[string](b, "document.querySelector('"+card("loss")+" [data-param=percentage] .msg').textContent"); s != "A fraction, 0 to 1: for 35%, type 0.35." {
			t.Errorf("loss's share of 35 says: %q", s)
		}
		if u := eval[string](b, "document.querySelector('"+card("loss")+" [data-param=percentage] .unit').textContent"); u != "of requests" {
			t.Errorf("beside a refused share: %q", u)
		}
		if s := sees(card("loss")); !strings.Contains(s, "fix the values") {
			t.Errorf("loss with a bad share says: %q", s)
		}
		b.click("#save")
		b.wait("the save refused before sending", "document.getElementById('banner').textContent.includes('needs fixing')")
		b.set(`[data-path="loss.percentage"]`, "0.35")
		if u := eval[string](b, "document.querySelector('"+card("loss")+" [data-param=percentage] .unit').textContent"); u != "= 35% of requests" {
			t.Errorf("beside 0.35: %q", u)
		}

		// replace, beside the mocks, in the same terms.
		b.set(`[data-path="replace"]`, "0.5")
		if u := eval[string](b, "document.querySelector('#mocks .field.share .unit').textContent"); u != "= 50% of matching requests" {
			t.Errorf("beside replace: %q", u)
		}

		// The mock's own abort, in the same cards.
		if !eval[bool](b, "document.querySelector('#mocks details.mock-faults').open") {
			t.Error("the mock's faults are folded though its abort is on")
		}
		if s := sees(`[data-path="mocks[0].proxy.abort"]`); s != "No answer: the connection is cut with a TCP reset (ECONNRESET) before the mock's answer." {
			t.Errorf("the mock's abort: %q", s)
		}
		b.set(`[data-path="mocks[0].proxy.abort.percentage"]`, "0.25")
		if s := eval[string](b, "document.querySelector('#mocks details.mock-faults > summary').textContent"); s != "Faults of this mockabort 0.25 (25%)" {
			t.Errorf("the mock's fold says %q", s)
		}
		eval[bool](b, "document.activeElement.blur(), document.querySelector('#mocks details.mock-faults').scrollIntoView(), window.scrollBy(0, -60), true")
		b.screenshot("mock-faults")

		eval[bool](b, "document.activeElement.blur(), document.getElementById('faults').scrollIntoView(), window.scrollBy(0, -12), true")
		b.screenshot("faults")

		b.click("#save")
		b.wait("saved", "document.getElementById('toast').textContent === 'Saved proxy payments'")
		doc, after := stored(t, base, "payments")
		if after == before {
			t.Errorf("the revision did not change: %s", after)
		}
		sameJSON(t, "loss", doc["loss"], `{"percentage": 0.35, "status": 429, "retry_after": 2, "headers": {"X-Why": "quota"}, "when": {"count": {"first": 2}, "per": {"header": "Idempotency-Key"}}}`)
		sameJSON(t, "abort", doc["abort"], `{"percentage": 0.125, "at": "body", "after": 1024}`)
		sameJSON(t, "latency", doc["latency"], `{"percentage": 0.25, "min": 0.2, "max": 0.5}`)
		if doc["replace"] != 0.5 {
			t.Errorf("replace: stored %v, want 0.5", doc["replace"])
		}
		for _, gone := range []string{"hang", "bandwidth"} {
			if v, ok := doc[gone]; ok {
				t.Errorf("%s is off but stored: %v", gone, v)
			}
		}
		sameJSON(t, "the mock's block", doc["mocks"].([]any)[0].(map[string]any)["proxy"], `{"abort": {"percentage": 0.25, "at": "request"}}`)
		b.wait("the new revision on the page", "document.getElementById('revision').textContent.includes('"+after+"')")
		if v := eval[string](b, "document.querySelector('[data-path=\"abort.after\"]').value"); v != "1Ki" {
			t.Errorf("after shows %q once saved, want 1Ki", v)
		}
	})

	// The YAML says what the cards said, and the form comes back from it.
	t.Run("the cards and the YAML", func(t *testing.T) {
		b.t = t
		b.click("#mode")
		b.wait("the YAML", "!document.getElementById('yaml').hidden")
		y := eval[string](b, "document.getElementById('yaml').value")
		if !strings.Contains(y, "abort:\n  percentage: 0.125\n  at: body\n  after: 1024\n") || strings.Contains(y, "\nhang:") || strings.Contains(y, "\nbandwidth:") {
			t.Errorf("the YAML:\n%s", y)
		}
		b.click("#mode")
		b.wait("the form", "!document.querySelector('fieldset.plain').hidden && document.querySelector('[data-path=\"abort.at\"]').value === 'body'")
		if !eval[bool](b, "document.querySelector('"+card("abort")+" input[role=switch]').checked && !document.querySelector('"+card("hang")+" input[role=switch]').checked") {
			t.Error("back from the YAML, the switches changed")
		}
	})

	// The list names the faults that are on, the new ones included.
	t.Run("the list", func(t *testing.T) {
		b.t = t
		b.open("/")
		b.wait("the list", "document.querySelector('tr[data-proxy=payments]')")
		if s := eval[string](b, "document.querySelector('tr[data-proxy=payments]').textContent"); !strings.Contains(s, "loss 0.35 (35%) → 429") || !strings.Contains(s, "abort 0.125 (12.5%) at body") ||
			strings.Contains(s, "hang") || !strings.Contains(s, "1 mock with its own") {
			t.Errorf("payments' row: %q", s)
		}
		b.open("/proxies/payments")
		b.wait("the cards", "document.querySelectorAll('#faults .fault').length === 5 && !document.getElementById('save').disabled")
	})

	t.Run("a conflicting save is refused", func(t *testing.T) {
		b.t = t
		doc, rev := stored(t, base, "payments")
		doc["timeout"] = 40
		raw, _ := json.Marshal(doc)
		if status, _ := adminCall(t, base, "PUT", "/api/v1/proxies/payments", string(raw), "If-Match", rev); status != 200 {
			t.Fatalf("the other writer: %d", status)
		}
		b.click(card("bandwidth") + " input[role=switch]")
		b.set(`[data-path="bandwidth.bytes_per_second"]`, "64Ki")
		if s := sees(card("bandwidth")); s != "A complete answer, its body paced to 64 KiB per second: 1 MiB takes 16 s." {
			t.Errorf("bandwidth: %q", s)
		}
		b.click("#save")
		b.wait("the mismatch", "document.getElementById('banner').textContent.includes('changed since you loaded it; reload to see the current version')")
		doc, _ = stored(t, base, "payments")
		if _, ok := doc["bandwidth"]; ok || doc["timeout"] != 40.0 {
			t.Fatalf("the stale save overwrote: %v", doc)
		}
		if !eval[bool](b, "document.querySelector('"+card("bandwidth")+" input[role=switch]').checked") {
			t.Error("the edit is gone from the page after the refusal")
		}
		b.click("#reload-proxy")
		b.wait("the current version", "document.querySelector('[data-path=\"timeout\"]').value === '40' && !document.querySelector('"+card("bandwidth")+" input[role=switch]').checked")
	})

	// A field under Advanced that needs fixing opens the fold.
	t.Run("Advanced opens for a field in error", func(t *testing.T) {
		b.t = t
		b.set(`[data-path="timeout"]`, "0")
		b.click("#save")
		b.wait("Advanced opened on the field", "document.getElementById('advanced').open && document.activeElement === document.querySelector('[data-path=\"timeout\"]')")
		eval[bool](b, "window.scrollTo(0, 0), true")
		b.open("/proxies/payments")
		b.wait("the page", "document.querySelectorAll('#faults .fault').length === 5")
		b.click("#advanced > summary")
		b.wait("Advanced open", "document.getElementById('advanced').open && document.querySelector('[data-path=\"timeout\"]').checkVisibility()")
		eval[bool](b, "document.getElementById('advanced').scrollIntoView(), window.scrollBy(0, -12), true")
		b.screenshot("advanced")
	})

	// A new proxy's page asks for its name and upstream first.
	t.Run("new proxy", func(t *testing.T) {
		b.t = t
		b.open("/new")
		b.wait("the form", "document.getElementById('identity') && document.getElementById('faults')")
		if !eval[bool](b, "!!(document.getElementById('identity').compareDocumentPosition(document.getElementById('faults')) & Node.DOCUMENT_POSITION_FOLLOWING) && document.getElementById('identity').contains(document.querySelector('[data-path=\"url\"]'))") {
			t.Error("a new proxy's name and upstream do not come first")
		}
		if n := eval[int](b, "document.querySelectorAll('#faults .fault.on').length"); n != 0 {
			t.Errorf("a new proxy starts with %d faults on", n)
		}
	})
}
