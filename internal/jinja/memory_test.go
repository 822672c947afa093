package jinja

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// TestFiltersHoldWhatTheyAreCharged: what each filter madeAhead charges
// before it runs is at least what its output holds, as the process's own
// heap shows it, on a string and on lists of strings and of dicts.
func TestFiltersHoldWhatTheyAreCharged(t *testing.T) {
	const n = MaxRange // batch(1) and slice(n) at their bound of groups
	list := make([]any, n)
	dicts := make([]any, n)
	for i := range list {
		list[i] = fmt.Sprint("k", i)
		dicts[i] = map[string]any{"a": i % 1000}
	}
	inputs := []struct {
		what string
		v    any
	}{{"a string", strings.Repeat("abcd", n/4)}, {"a list of strings", list}, {"a list of dicts", dicts}}
	ev := mustCompile(t, "x").start(NewVars()).r.Evaluator()
	for name := range madeAhead {
		f, _ := gonja.DefaultEnvironment.Filters.Get(name)
		for _, in := range inputs {
			params := exec.NewVarArgs()
			switch name {
			case "batch":
				params.Args = []*exec.Value{exec.AsValue(1)}
			case "slice":
				params.Args = []*exec.Value{exec.AsValue(n)}
			case "selectattr", "rejectattr", "map", "groupby":
				if in.what != "a list of dicts" {
					continue
				}
				if name == "map" {
					params.KwArgs["attribute"] = exec.AsValue("a")
				} else {
					params.Args = []*exec.Value{exec.AsValue("a")}
				}
			case "dictsort", "items":
				continue // of dicts only, weighed by their pairs below
			}
			value := exec.AsValue(in.v)
			charged, err := ahead(name, value, params)
			if err != nil {
				t.Fatalf("%s of %s: %v", name, in.what, err)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			out := f(ev, value, params)
			runtime.GC()
			runtime.ReadMemStats(&after)
			held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			runtime.KeepAlive(out)
			if out.IsError() {
				if msg := out.Error(); strings.Contains(msg, "unhashable") || strings.HasSuffix(msg, "is not a list") {
					continue // unique of dicts, slice of a string: errors, not values
				}
				t.Fatalf("%s of %s: %.200s", name, in.what, out.Error())
			}
			t.Logf("%-10s of %-17s holds %6.1f bytes an item, charged %6.1f", name, in.what, float64(held)/n, float64(charged)/n)
			if held > int64(charged) {
				t.Errorf("%s of %s holds %d bytes, more than the %d charged", name, in.what, held, charged)
			}
		}
	}
}
