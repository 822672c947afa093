package proxy

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/doppelproxy/doppel/internal/fault"
)

type outcome struct {
	answer string  // mocked, dropped or forwarded
	waited float64 // latency_injected_ms
}

// replay sends the request ids through d, from 25 goroutines, in the given
// order, and returns each id's outcome.
func replay(t *testing.T, d *doppel, ids []string) map[string]outcome {
	t.Helper()
	out := make(map[string]outcome, len(ids))
	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	for range 25 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				res, body := get(t, d.URL+"/m", map[string]string{"X-Request-ID": id})
				answer := "forwarded"
				switch {
				case string(body) == "mocked":
					answer = "mocked"
				case res.StatusCode == 503:
					answer = "dropped"
				}
				mu.Lock()
				out[id] = outcome{answer: answer}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	for _, line := range d.logs.lines(t, len(ids)) {
		id := line["request_id"].(string)
		o := out[id]
		o.waited = line["latency_injected_ms"].(float64)
		out[id] = o
	}
	return out
}

func seededDoppel(t *testing.T, roller fault.Roller) *doppel {
	up, _ := upstreamCounting(t)
	return start(t, mocks(up.URL, "replace: 0.5\nloss: {percentage: 0.3, status: 503}\nlatency: {percentage: 0.5, min: 0, max: 0.4}", `
- name: mm
  request: {method: GET, url: "^/m$"}
  response: {status: 200, body: mocked}
`), roller)
}

func TestSeededFaultsReplayExactly(t *testing.T) {
	ids := make([]string, 500)
	reversed := make([]string, 500)
	for i := range ids {
		ids[i] = fmt.Sprintf("run-%03d", i)
		reversed[len(ids)-1-i] = ids[i]
	}
	first := replay(t, seededDoppel(t, fault.NewSeeded("ci-1234")), ids)
	second := replay(t, seededDoppel(t, fault.NewSeeded("ci-1234")), reversed)
	other := replay(t, seededDoppel(t, fault.NewSeeded("ci-9999")), ids)
	random := replay(t, seededDoppel(t, nil), ids)

	kinds := map[string]int{}
	differ := func(a, b map[string]outcome) int {
		n := 0
		for _, id := range ids {
			if a[id].answer != b[id].answer || math.Abs(a[id].waited-b[id].waited) > 150 {
				n++
			}
		}
		return n
	}
	for _, id := range ids {
		a, b := first[id], second[id]
		kinds[a.answer]++
		if a.answer != b.answer {
			t.Errorf("%s: %s, then %s", id, a.answer, b.answer)
		}
		// The same delay was drawn; what was waited varies by the
		// milliseconds the answer itself took.
		if math.Abs(a.waited-b.waited) > 150 {
			t.Errorf("%s waited %.1fms, then %.1fms", id, a.waited, b.waited)
		}
	}
	if kinds["mocked"] < 150 || kinds["dropped"] < 50 || kinds["forwarded"] < 50 {
		t.Fatalf("the faults do not look like the configuration: %v", kinds)
	}
	if n := differ(first, other); n < 100 {
		t.Errorf("another seed changed only %d of 500 outcomes", n)
	}
	if n := differ(first, random); n < 100 {
		t.Errorf("without a seed, only %d of 500 outcomes changed", n)
	}
}
