package proxy

import (
	"fmt"
	"sync"
	"testing"

	"github.com/doppelproxy/doppel/internal/fault"
)

type outcome struct {
	answer string  // mocked, dropped or forwarded
	drawn  float64 // the latency's draw in [0, 1); -1 when it did not fire
}

// drawsOf records the latency each request id drew from r: what the seed
// decides, apart from how long the machine then took to wait it out.
type drawsOf struct {
	r     fault.Roller
	mu    sync.Mutex
	drawn map[string]float64
}

func (d *drawsOf) Float64(k fault.Key) float64 {
	v := d.r.Float64(k)
	if k.Roll == fault.RollLatencyDraw {
		d.mu.Lock()
		d.drawn[k.RequestID] = v
		d.mu.Unlock()
	}
	return v
}

// replay sends the request ids through d, from 25 goroutines, in the given
// order, and returns each id's outcome.
func replay(t *testing.T, d *doppel, draws *drawsOf, ids []string) map[string]outcome {
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
	draws.mu.Lock()
	defer draws.mu.Unlock()
	for id, o := range out {
		o.drawn = -1
		if v, ok := draws.drawn[id]; ok {
			o.drawn = v
		}
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
	run := func(r fault.Roller, ids []string) map[string]outcome {
		draws := &drawsOf{r: r, drawn: map[string]float64{}}
		return replay(t, seededDoppel(t, draws), draws, ids)
	}
	first := run(fault.NewSeeded("ci-1234"), ids)
	second := run(fault.NewSeeded("ci-1234"), reversed)
	other := run(fault.NewSeeded("ci-9999"), ids)
	random := run(fault.Random{}, ids)

	kinds := map[string]int{}
	differ := func(a, b map[string]outcome) int {
		n := 0
		for _, id := range ids {
			if a[id] != b[id] {
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
		// The same delay was drawn (what was waited varies with the load).
		if a.drawn != b.drawn {
			t.Errorf("%s drew the latency %v, then %v", id, a.drawn, b.drawn)
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
