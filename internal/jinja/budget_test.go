package jinja

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// withBudget sets the process-wide budget for one test. The tests that use
// it are not parallel: the budget is the process's.
func withBudget(t *testing.T, bytes int64) {
	t.Helper()
	if _, inUse := Budget(); inUse != 0 {
		t.Fatalf("%d bytes of the budget are held before the test", inUse)
	}
	old, _ := Budget()
	SetBudget(bytes)
	t.Cleanup(func() { SetBudget(old) })
}

func mustCompile(t *testing.T, src string) *Template {
	t.Helper()
	tpl, err := Compile(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return tpl
}

// holding renders tpl with a `hold()` that blocks until release is
// closed, after reporting that the render reached it.
func holding(tpl *Template, reached chan<- struct{}, release <-chan struct{}) (string, error) {
	vars := NewVars()
	vars.Set("hold", func() string {
		reached <- struct{}{}
		<-release
		return ""
	})
	return tpl.ExecuteToString(vars)
}

// Renders that together need more than the process-wide budget: those that
// fit run, held open together; the rest stop at once with the budget's
// error, while the held ones still hold their share; nothing is held once
// all have ended.
func TestRendersShareTheProcessBudget(t *testing.T) {
	const each = 4 << 20 // the `*` makes it, then it is written: 8 MiB a render
	const fit = 5
	withBudget(t, fit*2*each+each) // with room for what else a render makes, not for a sixth
	tpl := mustCompile(t, `{{ "x" * `+strconv.Itoa(each)+` }}{{ hold() }}`)
	release := make(chan struct{})
	type result struct {
		out string
		err error
	}
	results := make(chan result, 12)
	held := 0
	var wg sync.WaitGroup
	for range 12 {
		reached := make(chan struct{}, 1)
		wg.Go(func() {
			out, err := holding(tpl, reached, release)
			results <- result{out, err}
		})
		// One at a time, so which ones fit does not depend on timing.
		select {
		case <-reached:
			held++
		case r := <-results:
			if !errors.Is(r.err, ErrBudgetExhausted) {
				t.Fatalf("a render that did not fit: %v, want the budget's error", r.err)
			}
			if !strings.Contains(r.err.Error(), "rendering budget") {
				t.Errorf("the error does not name the budget: %v", r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a render neither held nor failed")
		}
		if limit, inUse := Budget(); inUse > limit {
			t.Fatalf("%d bytes held, over the budget of %d", inUse, limit)
		}
	}
	if held != fit {
		t.Errorf("%d renders held at once, want the %d that fit", held, fit)
	}
	close(release)
	wg.Wait()
	close(results)
	for r := range results {
		if r.err != nil || len(r.out) != each {
			t.Errorf("a held render: %d bytes, %v", len(r.out), r.err)
		}
	}
	if _, inUse := Budget(); inUse != 0 {
		t.Errorf("%d bytes still held after every render ended", inUse)
	}
}

// Whatever way a render ends, it gives back what it reserved: output,
// the per-answer bound, an undefined variable, a panic in gonja, a panic
// in a function the template calls, the budget's own refusal. Many at
// once, with the count watched all along.
func TestEveryRenderGivesItsBudgetBack(t *testing.T) {
	withBudget(t, 24<<20)
	boom := func() string { panic("boom") }
	cases := []struct {
		src     string
		failure bool
	}{
		{`{{ "x" * 3000000 }}`, false},
		{`{% for i in range(1000) %}{{ i }},{% endfor %}`, false},
		{`{% set l = [] %}{% for i in range(50) %}{% do l.append("y" * 60000) %}{% endfor %}{{ l | length }}`, false},
		{`{{ "x" * 3000000 }}{{ missing }}`, true},
		{`{{ "x" * 3000000 }}{{ a % b }}`, true},
		{`{{ "x" * 3000000 }}{{ boom() }}`, true},
		{`{{ "x" * 3000000 }}{{ "y" * 17000000 }}`, true},
		{`{% set a = "x" * 15000000 %}{% set b = "y" * 15000000 %}`, true}, // more than the whole budget
	}
	tpls := make([]*Template, len(cases))
	for i, c := range cases {
		tpls[i] = mustCompile(t, c.src)
	}
	var over atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if limit, inUse := Budget(); inUse > limit {
				over.Store(inUse)
			}
			runtime.Gosched()
		}
	}()
	var refused atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				k := (g + i) % len(cases)
				vars := NewVars()
				vars.Set("a", 1)
				vars.Set("b", 0)
				vars.Set("boom", boom)
				_, err := tpls[k].ExecuteToBytes(vars)
				switch {
				case errors.Is(err, ErrBudgetExhausted):
					refused.Add(1)
				case err != nil && !cases[k].failure:
					t.Errorf("%s: %v", cases[k].src, err)
				case err == nil && cases[k].failure:
					t.Errorf("%s rendered", cases[k].src)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-watched
	if n := over.Load(); n != 0 {
		t.Errorf("%d bytes were held at once, over the budget", n)
	}
	if refused.Load() == 0 {
		t.Error("no render was refused by the budget")
	}
	if _, inUse := Budget(); inUse != 0 {
		t.Errorf("%d bytes still held after every render ended", inUse)
	}
}

// An ordinary answer reserves one small step of the budget, not a share
// sized for the bounds.
func TestSmallRendersReserveLittle(t *testing.T) {
	withBudget(t, 1<<30)
	reached, release := make(chan struct{}, 1), make(chan struct{})
	done := make(chan error, 1)
	tpl := mustCompile(t, `{"id": "{{ "a" ~ "b" }}", "items": {{ [1, 2, 3] | tojson }}}{{ hold() }}`)
	go func() {
		_, err := holding(tpl, reached, release)
		done <- err
	}()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("the render ended early: %v", err)
	}
	_, inUse := Budget()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if inUse == 0 || inUse > minReserve {
		t.Errorf("an ordinary render held %d bytes, want a step of at most %d", inUse, minReserve)
	}
}
