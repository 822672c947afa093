package jinja

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/builtins"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// Rendering is bounded so that no template, whatever the request, can
// exhaust the process or hold it for long:
//
//   - sizes are checked before they are made where a template turns a
//     small number into a large value: a string repeated (`"-" * n`), a
//     width (`center`, `indent`, `format`, the string methods `ljust`,
//     `rjust`, `zfill`, `center`, `expandtabs`, `format`), a separator or
//     replacement repeated (`join`, `replace`), a count of groups (`batch`,
//     `slice`) or of items (`range`, `lipsum`). The number may come from
//     the request (`?n=99999999999` is a string gonja reads as an integer);
//   - every value made by a filter, a method, `+`, `~`, a list, tuple or
//     dict literal or a function call is held to MaxOutput (its whole depth,
//     so that `{% set l = [l, l] %}` cannot double a structure for ever);
//   - each answer (every template rendered for one request) has a budget:
//     MaxTurns turns of loops, counted as each loop starts (so nested loops
//     multiply against it), and MaxBytes bytes of values made, or read
//     whole (compared, searched, sliced, handed to a filter or a test).
//
// Over a bound, rendering stops with an error (500 TEMPLATE_RENDER_ERROR).
// What every render of the process makes together is bounded as well, by
// the rendering budget (budget.go).
// gonja's evaluator has no hook for operators or loops, so the parsed tree
// is rewritten at compile: `a * b` becomes `a | _doppel_times(b)`, and the
// other checked expressions and every loop's sequence get a checking
// filter after them.

// MaxRange bounds the items one call of range() yields, as Jinja2's own
// sandbox does.
const MaxRange = 100_000

// MaxTurns bounds the turns of every loop of one answer together.
const MaxTurns = 250_000

// MaxBytes bounds the bytes of the values one answer makes, and of those
// it compares, searches, slices or hands to a filter.
const MaxBytes = 64 << 20

// maxIndent bounds tojson's indent: the output grows by it on every line.
const maxIndent = 64

// maxWords bounds the words lipsum writes.
const maxWords = 100_000

// maxItems bounds the items made from a string (`list`, `split`).
const maxItems = 1_000_000

// maxWrap bounds wordwrap's width: gonja's wrapping slows with it.
const maxWrap = 10_000

// The filters the rewrite inserts, and the variable that holds an
// answer's budget.
const (
	sizeFilter  = "_doppel_size"
	loopFilter  = "_doppel_loop"
	readFilter  = "_doppel_read"
	textFilter  = "_doppel_text"
	printFilter = "_doppel_print"
	budgetName  = "_doppel_budget"
)

// budget is what one answer has spent, and what the template being
// executed holds of the process-wide budget (budget.go). Its fields are
// unexported, so a template can name the variable but not change it.
type budget struct {
	turns, bytes int
	held, used   int  // reserved of the process-wide budget, and taken of that
	refused      bool // the process-wide budget refused this execution
}

// spend charges turns, and bytes made and read, to the answer whose
// variables e sees; what is made is reserved of the process-wide budget
// too.
func spend(e *exec.Evaluator, turns, made, read int) error {
	v, _ := e.Environment.Context.Get(budgetName)
	b, ok := v.(*budget)
	if !ok {
		return fmt.Errorf("%s is Doppel's own variable", budgetName)
	}
	b.turns += turns
	b.bytes += made + read
	switch {
	case b.turns > MaxTurns:
		return fmt.Errorf("the loops of this answer would turn more than %d times, the bound for one answer", MaxTurns)
	case b.bytes > MaxBytes:
		return fmt.Errorf("this answer would make or read more than %d MiB of values, the bound for one answer", MaxBytes>>20)
	}
	if made > 0 || b.refused {
		return b.take(made)
	}
	return nil
}

func tooBig(what string, size int) error {
	return fmt.Errorf("%s would make %d bytes or items, over the %d MiB rendering bound", what, size, MaxOutput>>20)
}

// product is a*b, or MaxOutput+1 when that is larger or overflows.
func product(a, b int) int { return productUpTo(a, b, MaxOutput) }

// productUpTo is a*b, or limit+1 when that is larger or overflows.
func productUpTo(a, b, limit int) int {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > (limit+1)/b {
		return limit + 1
	}
	return a * b
}

// arg is the argument at position pos, or named name; nil when absent.
func arg(params *exec.VarArgs, pos int, name string) *exec.Value {
	if pos < len(params.Args) {
		return params.Args[pos]
	}
	return params.KwArgs[name]
}

// intArg is an integer argument read as gonja's filters read it: a
// string of digits is a number too.
func intArg(params *exec.VarArgs, pos int, name string) (int, bool) {
	v := arg(params, pos, name)
	if v == nil || !(v.IsInteger() || v.IsFloat() || v.IsString()) {
		return 0, false
	}
	return v.Integer(), true
}

// sizers estimate, before a filter runs, how large its result can be.
var sizers = map[string]func(in *exec.Value, params *exec.VarArgs) int{
	"center": func(in *exec.Value, params *exec.VarArgs) int {
		w, _ := intArg(params, 0, "width")
		return w
	},
	"indent": func(in *exec.Value, params *exec.VarArgs) int {
		w := 4
		if v := arg(params, 0, "width"); v != nil {
			switch {
			case v.IsInteger():
				w = v.Integer()
			case v.IsString():
				w = len(v.String()) // indent takes a string as the indentation itself
			}
		}
		return len(in.String()) + product(strings.Count(in.String(), "\n")+1, w)
	},
	"replace": func(in *exec.Value, params *exec.VarArgs) int {
		old, repl := arg(params, 0, "old"), arg(params, 1, "new")
		if old == nil || repl == nil {
			return 0
		}
		s, o := in.String(), old.String()
		n := strings.Count(s, o)
		if o == "" {
			n = utf8.RuneCountInString(s) + 1
		}
		if c, ok := intArg(params, 2, "count"); ok && c >= 0 && c < n {
			n = c
		}
		return len(s) + product(n, max(len(repl.String())-len(o), 0))
	},
	"join": func(in *exec.Value, params *exec.VarArgs) int {
		d := arg(params, 0, "d")
		if d == nil || !in.IsList() {
			return 0
		}
		return product(in.Len()-1, len(d.String()))
	},
	"batch": func(in *exec.Value, params *exec.VarArgs) int {
		n, _ := intArg(params, 0, "linecount") // what fill_with can add to the last group
		return over(n, MaxRange)
	},
	"slice": func(in *exec.Value, params *exec.VarArgs) int {
		n, _ := intArg(params, 0, "slices")
		return over(n, MaxRange)
	},
	"tojson": func(in *exec.Value, params *exec.VarArgs) int {
		v := arg(params, 0, "indent")
		switch {
		case v == nil:
		case v.IsInteger() && v.Integer() > maxIndent, v.IsString() && (len(v.String()) > maxIndent || v.Integer() > maxIndent):
			return MaxOutput + 1
		}
		return 0
	},
	"format": func(in *exec.Value, params *exec.VarArgs) int {
		return formatSize(in.String(), params)
	},
	"list": func(in *exec.Value, params *exec.VarArgs) int {
		if in.IsString() && len(in.String()) > maxItems {
			return MaxOutput + 1
		}
		return 0
	},
	"wordwrap": func(in *exec.Value, params *exec.VarArgs) int {
		if w, _ := intArg(params, 0, "width"); w > maxWrap || len(in.String()) > MaxOutput/16 {
			return MaxOutput + 1
		}
		return 0
	},
}

// over maps a count of groups or items past the bound when it is more
// than most, so that it is refused like a size.
func over(n, most int) int {
	if n > most {
		return MaxOutput + 1
	}
	return 0
}

// widths is how much the widths and precisions written in a format
// string (printf's `%10.3f`, Python's `{:>10}`) can make it grow: the sum
// of every run of digits in it, which over-counts, never under-counts.
func widths(format string) int {
	total, n := len(format), 0
	for i := 0; i <= len(format); i++ {
		if i < len(format) && format[i] >= '0' && format[i] <= '9' {
			if n <= MaxOutput {
				n = n*10 + int(format[i]-'0')
			}
			continue
		}
		total += n
		n = 0
		if total > MaxOutput {
			return MaxOutput + 1
		}
	}
	return total
}

// itemMem and groupMem are what a filter's output holds for each item of
// its input (one slot of a list, the item as gonja wraps it) and each
// group it makes (a list of its own), as measured of gonja's filters with
// room to spare (TestFiltersHoldWhatTheyAreCharged).
const (
	itemMem  = 96
	groupMem = 64
)

// madeAhead are the filters that make a value for each item of their input
// (each byte of a string): their output is charged before they run, by the
// items and groups it will hold, so that one that cannot fit is refused
// before it is made: `q | batch(1)` over a query of a million characters
// would make a million lists.
var madeAhead = map[string]func(items int, params *exec.VarArgs) (groups int){
	"batch": func(items int, params *exec.VarArgs) int {
		n, _ := intArg(params, 0, "linecount")
		if n <= 0 {
			return items
		}
		return (items + n - 1) / n
	},
	"slice": func(items int, params *exec.VarArgs) int {
		n, _ := intArg(params, 0, "slices")
		return min(max(n, 0), items+1)
	},
	"groupby":    func(items int, _ *exec.VarArgs) int { return items },
	"dictsort":   func(items int, _ *exec.VarArgs) int { return items },
	"items":      func(items int, _ *exec.VarArgs) int { return items },
	"list":       noGroups,
	"map":        noGroups,
	"select":     noGroups,
	"reject":     noGroups,
	"selectattr": noGroups,
	"rejectattr": noGroups,
	"unique":     noGroups,
	"sort":       noGroups,
	"reverse":    noGroups,
}

func noGroups(int, *exec.VarArgs) int { return 0 }

// ahead is what madeAhead charges a filter before it runs (0 for the
// others), or why it may not run: at most MaxRange groups.
func ahead(name string, in *exec.Value, params *exec.VarArgs) (int, error) {
	groups := madeAhead[name]
	if groups == nil {
		return 0, nil
	}
	items := length(in)
	g := groups(items, params)
	if (name == "batch" || name == "slice") && g > MaxRange {
		return 0, fmt.Errorf("%s would make %d groups, over the bound of %d", name, g, MaxRange)
	}
	if items > MaxBytes/itemMem || g > MaxBytes/groupMem {
		return MaxBytes + 1, nil
	}
	return min(items*itemMem+g*groupMem, MaxBytes+1), nil
}

// boundedFilter checks a filter's size beforehand when a sizer knows how,
// and its result against MaxOutput, charging what it makes to the answer:
// before it runs when madeAhead knows how much, and what its result holds
// beyond that once it has. A float it gives must be a number.
func boundedFilter(name string, f exec.FilterFunction) exec.FilterFunction {
	size := sizers[name]
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if in.IsError() {
			return f(e, in, params)
		}
		if size != nil {
			if n := size(in, params); n > MaxOutput {
				return exec.AsValue(tooBig(name, n))
			}
		}
		c := cost(in)
		if c > MaxOutput {
			return exec.AsValue(tooBig(name, c))
		}
		before, err := ahead(name, in, params)
		if err != nil {
			return exec.AsValue(err)
		}
		if err := spend(e, 0, before, c); err != nil {
			return exec.AsValue(err)
		}
		out := f(e, in, params)
		if out.IsError() {
			return out
		}
		if out.IsFloat() && (math.IsInf(out.Float(), 0) || math.IsNaN(out.Float())) {
			return exec.AsValue(fmt.Errorf("the result is %v, which is not a number a template can use", out.Float()))
		}
		n, mem, _ := weigh(out.Interface())
		if n > MaxOutput {
			return exec.AsValue(tooBig(name, n))
		}
		if err := spend(e, 0, max(mem-before, 0), 0); err != nil {
			return exec.AsValue(err)
		}
		return out
	}
}

// sized holds a value just made (by `+`, `~`, a literal or a call) to
// MaxOutput over its whole depth, and charges it to the answer, with the
// receiver a method read when there is one (its argument).
func sized(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	w, mem, steps := weigh(in.Interface())
	if w > MaxOutput {
		return exec.AsValue(tooBig("the value", w))
	}
	read := 0
	if len(params.Args) > 0 { // a method's receiver
		read = length(params.Args[0])
	}
	if err := spend(e, steps/64, mem, read); err != nil {
		return exec.AsValue(err)
	}
	return in
}

// printable refuses to write a function as a value: `{{ range }}` or
// `{{ name.upper }}` would otherwise put gonja's Go signature in a body.
func printable(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if !in.IsError() && in.Val.IsValid() && in.Val.Kind() == reflect.Func {
		return exec.AsValue(errors.New("a function is written as a value: call it, with ()"))
	}
	return in
}

// mayBeFunction reports whether an output's expression can hold a
// function: a global's name (range, lipsum…), any name in a template that
// binds names itself (setting), or an attribute (a method not called). A
// request's variables are strings and JSON values, never functions: their
// outputs cost nothing.
func mayBeFunction(e nodes.Expression, setting bool) bool {
	switch x := e.(type) {
	case *nodes.Name:
		return setting || Environment.Context.Has(x.Name.Val)
	case *nodes.GetAttribute, *nodes.GetItem:
		return true
	case *nodes.FilteredExpression:
		return len(x.Filters) == 1 && strings.HasPrefix(x.Filters[0].Name, "_doppel_") && mayBeFunction(x.Expression, setting)
	}
	return false
}

// read charges a value about to be compared, searched or sliced by its
// length, and hands it on unchanged.
func read(e *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	c := cost(in)
	if c > MaxOutput {
		return exec.AsValue(tooBig("the value read", c))
	}
	if err := spend(e, 0, 0, c); err != nil {
		return exec.AsValue(err)
	}
	return in
}

// readText is read for strings only: what indexing reads whole (gonja
// makes a string runes to index it), where a list or dict is reached
// directly.
func readText(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() || !in.IsString() {
		return in
	}
	return read(e, in, params)
}

// length is the bytes of a string, the items of a list or dict, else 0.
// It is read without gonja's Len, which makes a string runes to count
// them.
func length(v *exec.Value) int {
	if d, ok := v.Interface().(*exec.Dict); ok {
		return len(d.Pairs)
	}
	switch x := reflect.ValueOf(v.Interface()); x.Kind() {
	case reflect.String, reflect.Slice, reflect.Array, reflect.Map:
		return x.Len()
	}
	return 0
}

// cost is what reading v whole takes: a string's bytes, a list's or
// dict's weight (MaxOutput+1 when it holds itself).
func cost(v *exec.Value) int {
	if v.IsString() {
		return len(v.String())
	}
	switch v.Interface().(type) {
	case *exec.Dict:
	default:
		switch reflect.ValueOf(v.Interface()).Kind() {
		case reflect.Slice, reflect.Array, reflect.Map:
		default:
			return 0
		}
	}
	w, _, _ := weigh(v.Interface())
	return w
}

// looped charges a loop's turns to the answer as the loop starts, with
// the text its body writes on each turn (its argument), and hands its
// sequence on unchanged.
func looped(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	turns, text := length(in), 0
	if len(params.Args) > 0 { // the bytes of text the body writes on each turn
		text = productUpTo(turns, params.Args[0].Integer(), MaxBytes)
	}
	// The text is charged to the answer here, and reserved as it is
	// written (jinja.go).
	if err := spend(e, turns, 0, text); err != nil {
		return exec.AsValue(err)
	}
	return in
}

// maxDepth bounds how deeply lists and dicts may nest.
const maxDepth = 1000

// What values take in memory, as weigh counts it: a string's header, a
// slice's, one slot of a list, gonja's wrapper of a value, a number, and
// a map's overhead for each of its entries.
const (
	stringMem = 16
	sliceMem  = 24
	slotMem   = 16
	valueMem  = 32
	scalarMem = 8
	entryMem  = 48
)

// weigh is about how many bytes v takes when rendered, MaxOutput+1 when
// more (or when it nests deeper than maxDepth, or holds itself); about
// how many bytes of memory it holds (what it shares with itself counted
// once); and the steps it took. What a list or dict holds counts every
// time it is reached, as rendering would write it, but a list or dict
// that holds others is weighed once: a structure that holds another
// twice costs no more to weigh than one that holds it once. One that
// holds none (a row of numbers or strings) is weighed wherever it is
// reached without being remembered: a list of a million such rows would
// spend more remembering them than weighing them.
func weigh(v any) (weight, mem, steps int) {
	w := weigher{}
	weight = w.of(reflect.ValueOf(v), 0)
	return weight, w.mem, w.steps
}

type weigher struct {
	memo       map[[2]uintptr]int // the weights of lists and dicts that hold others, or busy
	mem, steps int
}

const busy = -1

// unwrap is x without its interfaces, pointers and gonja's wrappers,
// whose memory it counts.
func (g *weigher) unwrap(x reflect.Value) reflect.Value {
	for x.Kind() == reflect.Interface || x.Kind() == reflect.Pointer {
		if x.IsNil() {
			return x
		}
		switch p := x.Interface().(type) {
		case *exec.Value:
			g.mem += valueMem
			x = p.Val
			continue
		case *exec.Dict: // what dict() makes: weighed as its pairs
			x = reflect.ValueOf(p.Pairs)
			continue
		case *exec.Pair:
			return x
		}
		x = x.Elem()
	}
	return x
}

// container reports whether x (unwrapped) can hold other values.
func container(x reflect.Value) bool {
	switch x.Kind() {
	case reflect.Slice, reflect.Map, reflect.Array, reflect.Pointer:
		return true
	}
	return false
}

func (g *weigher) of(x reflect.Value, depth int) int {
	g.steps++
	x = g.unwrap(x)
	switch x.Kind() {
	case reflect.Invalid, reflect.Interface, reflect.Pointer:
		if x.Kind() == reflect.Pointer && !x.IsNil() { // a pair of a dict
			p := x.Interface().(*exec.Pair)
			if depth > maxDepth {
				return MaxOutput + 1
			}
			g.mem += 2 * scalarMem
			return min(g.of(reflect.ValueOf(p.Key), depth+1)+g.of(reflect.ValueOf(p.Value), depth+1)+4, MaxOutput+1)
		}
		g.mem += scalarMem
		return 8
	case reflect.String:
		g.mem += stringMem + x.Len()
		return x.Len()
	case reflect.Slice, reflect.Map, reflect.Array:
	default:
		g.mem += scalarMem
		return 8
	}
	if depth > maxDepth {
		return MaxOutput + 1
	}
	var key [2]uintptr
	remembered := false
	if x.Kind() != reflect.Array {
		key = [2]uintptr{x.Pointer(), uintptr(x.Len())}
		switch m, ok := g.memo[key]; {
		case ok && m == busy:
			return MaxOutput + 1 // it holds itself
		case ok:
			return m
		}
	}
	// remember marks x as being weighed once it turns out to hold
	// another list or dict, before that one is weighed.
	remember := func(child reflect.Value) {
		if remembered || x.Kind() == reflect.Array || !container(g.unwrap(child)) {
			return
		}
		if g.memo == nil {
			g.memo = map[[2]uintptr]int{}
		}
		g.memo[key] = busy
		remembered = true
	}
	total := 2
	add := func(n int) { total = min(total+n, MaxOutput+1) }
	switch x.Kind() {
	case reflect.Map:
		g.mem += entryMem * (x.Len() + 1)
		for it := x.MapRange(); it.Next() && total <= MaxOutput; {
			remember(it.Value())
			add(g.of(it.Key(), depth+1) + g.of(it.Value(), depth+1) + 2)
		}
	default:
		if x.Kind() == reflect.Slice {
			g.mem += sliceMem + x.Len()*int(x.Type().Elem().Size())
		}
		for i := 0; i < x.Len() && total <= MaxOutput; i++ {
			remember(x.Index(i))
			add(g.of(x.Index(i), depth+1) + 1)
		}
	}
	if remembered {
		g.memo[key] = total
	}
	return total
}

// boundedFilters are gonja's filters, each bounded, and the ones the
// rewrite inserts.
func boundedFilters() *exec.FilterSet {
	set := exec.NewFilterSet(map[string]exec.FilterFunction{})
	set.Update(gonja.DefaultEnvironment.Filters)
	for _, name := range keys(set, "filters") {
		f, _ := set.Get(name)
		_ = set.Replace(name, boundedFilter(name, f))
	}
	// gonja measures a number or a boolean as 0; 1.1 refuses it, so a
	// template that reads the wrong variable fails instead of answering.
	for _, name := range []string{"length", "count"} {
		f, _ := gonja.DefaultEnvironment.Filters.Get(name)
		_ = set.Replace(name, boundedFilter(name, measured(name, f)))
	}
	sum, _ := gonja.DefaultEnvironment.Filters.Get("sum")
	mapped, _ := gonja.DefaultEnvironment.Filters.Get("map")
	_ = set.Replace("sum", boundedFilter("sum", summed(sum, mapped)))
	_ = set.Register(arithFilter, arith)
	_ = set.Register(negateFilter, negate)
	_ = set.Register(sizeFilter, sized)
	_ = set.Register(loopFilter, looped)
	_ = set.Register(readFilter, read)
	_ = set.Register(textFilter, readText)
	_ = set.Register(printFilter, printable)
	return set
}

// measured is a length filter that refuses what has no length.
func measured(name string, f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if in.IsNumber() || in.IsBool() {
			return exec.AsValue(fmt.Errorf("`%s` cannot measure %s, which has no length", name, in.String()))
		}
		return f(e, in, params)
	}
}

// stringSizers bound the string methods that take a width.
var stringSizers = map[string]func(self string, params *exec.VarArgs) int{
	"center": widthArg, "ljust": widthArg, "rjust": widthArg, "zfill": widthArg,
	"expandtabs": func(self string, params *exec.VarArgs) int {
		size := 8
		if n, ok := intArg(params, 0, "tabsize"); ok {
			size = n
		}
		return len(self) + product(strings.Count(self, "\t"), size)
	},
	"format":     formatSize,
	"format_map": formatSize,
	"replace": func(self string, params *exec.VarArgs) int {
		old, repl := arg(params, 0, "old"), arg(params, 1, "new")
		if old == nil || repl == nil {
			return 0
		}
		n := strings.Count(self, old.String())
		if old.String() == "" {
			n = utf8.RuneCountInString(self) + 1
		}
		return len(self) + product(n, max(len(repl.String())-len(old.String()), 0))
	},
	"join": func(self string, params *exec.VarArgs) int {
		items := arg(params, 0, "iterable")
		if items == nil {
			return 0
		}
		w, _, _ := weigh(items.Interface())
		return min(w, MaxOutput+1) + product(length(items), len(self))
	},
	"split":      splitItems,
	"rsplit":     splitItems,
	"splitlines": func(self string, _ *exec.VarArgs) int { return over(strings.Count(self, "\n")+1, maxItems) },
}

// keys are the names a gonja FilterSet or MethodSet holds, read from its
// map (field), which gonja does not export: every filter and method is
// wrapped, including those a later gonja adds.
func keys(set any, field string) []string {
	m := reflect.ValueOf(set).Elem().FieldByName(field)
	names := make([]string, 0, m.Len())
	for _, k := range m.MapKeys() {
		names = append(names, k.String())
	}
	return names
}

// splitItems bounds the items split and rsplit make.
func splitItems(self string, params *exec.VarArgs) int {
	if sep := arg(params, 0, "sep"); sep != nil && !sep.IsNil() && sep.String() != "" {
		return over(strings.Count(self, sep.String())+1, maxItems)
	}
	return over(len(self)/2+1, maxItems)
}

// formatSize is how large a format (printf's or Python's) can make its
// result: its own length and written widths, every field filled with all
// the arguments, and every integer argument as a width a field may take
// from it (`%*d`, `{:>{w}}`).
func formatSize(format string, params *exec.VarArgs) int {
	fields := strings.Count(format, "%") + strings.Count(format, "{")
	size, args := widths(format), 0
	each := func(v *exec.Value) {
		switch {
		case v.IsInteger():
			size += min(max(v.Integer(), 0), MaxOutput+1)
		case v.IsString():
			args += len(v.String())
		default:
			w, _, _ := weigh(v.Interface())
			args += min(w, MaxOutput+1)
		}
		size = min(size, MaxOutput+1)
		args = min(args, MaxOutput+1)
	}
	for _, v := range params.Args {
		each(v)
	}
	for _, v := range params.KwArgs {
		each(v)
	}
	return min(size+product(max(fields, 1), args), MaxOutput+1)
}

func widthArg(self string, params *exec.VarArgs) int {
	w, _ := intArg(params, 0, "width")
	return w
}

func boundedStringMethods(from *exec.MethodSet[string]) *exec.MethodSet[string] {
	methods := map[string]exec.Method[string]{}
	for _, name := range keys(from, "methods") {
		m, _ := from.Get(name)
		size := stringSizers[name]
		methods[name] = func(self string, selfValue *exec.Value, params *exec.VarArgs) (any, error) {
			if size != nil {
				if n := size(self, params); n > MaxOutput {
					return nil, tooBig(name, n)
				}
			}
			out, err := m(self, selfValue, params)
			if s, ok := out.(string); ok && len(s) > MaxOutput {
				return nil, tooBig(name, len(s))
			}
			return out, err
		}
	}
	return exec.NewMethodSet(methods)
}

// boundedGlobals are gonja's global functions, with range and lipsum
// bounded.
func boundedGlobals() *exec.Context {
	// gonja's global variables are left out: `gonja` is a map every
	// request would share, and `{% set gonja.x = … %}` would write to it.
	globals := exec.EmptyContext().Update(builtins.GlobalFunctions)
	globals.Set("range", rangeList)
	lipsumFn, _ := gonja.DefaultEnvironment.Context.Get("lipsum")
	lipsum := lipsumFn.(func(*exec.Evaluator, *exec.VarArgs) *exec.Value)
	globals.Set("lipsum", func(e *exec.Evaluator, params *exec.VarArgs) *exec.Value {
		n, ok := intArg(params, 0, "n")
		if !ok {
			n = 5
		}
		most, ok := intArg(params, 3, "max")
		if !ok {
			most = 100
		}
		if words := product(n, most); words > maxWords {
			return exec.AsValue(fmt.Errorf("lipsum() would write up to %d words, over the bound of %d", words, maxWords))
		}
		return lipsum(e, params)
	})
	return globals
}

// rangeList is Python's range(), as a list: gonja's own yields its items
// from a goroutine, which stays blocked for ever when the loop reading it
// stops early (a `break`, an error), and as a list `loop.length` and
// `| length` see its items. At most MaxRange items, charged to the
// answer's turns.
func rangeList(e *exec.Evaluator, params *exec.VarArgs) ([]int, error) {
	ints := make([]int, len(params.Args))
	for i, a := range params.Args {
		if !a.IsInteger() {
			ints = nil
			break
		}
		ints[i] = a.Integer()
	}
	start, stop, step := 0, 0, 1
	switch len(ints) {
	case 1:
		stop = ints[0]
	case 2:
		start, stop = ints[0], ints[1]
	case 3:
		start, stop, step = ints[0], ints[1], ints[2]
	default:
		return nil, exec.ErrInvalidCall(fmt.Errorf("expected signature is [start, ]stop[, step] where all arguments are integers"))
	}
	if step == 0 {
		return nil, exec.ErrInvalidCall(fmt.Errorf("step cannot be 0"))
	}
	// Counted in uint64, where the distance between any two int64 fits.
	var n uint64
	switch {
	case step > 0 && stop > start:
		n = (uint64(stop)-uint64(start)-1)/uint64(step) + 1
	case step < 0 && start > stop:
		n = (uint64(start)-uint64(stop)-1)/(-uint64(step)) + 1
	}
	if n > MaxRange {
		return nil, fmt.Errorf("range() would yield %d items, over the bound of %d", n, MaxRange)
	}
	out := make([]int, int(n))
	for i := range out {
		out[i] = start + i*step
	}
	return out, nil
}

// bound rewrites the parsed template so that rendering it is bounded (see
// the top of this file). It reaches every expression of the tree,
// including those gonja's `set`, `with` and `{% filter %}` keep in
// unexported fields: reflect cannot set those, so the slot is reopened at
// its own address and type (reflect.NewAt), which changes nothing but
// which node the slot holds.
//
// outputs says whether `{{ … }}` is checked too: a template that can build
// a value that holds itself (by assigning into a list, dict or namespace)
// or that writes into a buffer of gonja's (a `{% set %}` or `{% filter %}`
// block) has every output weighed and charged; any other writes straight
// into the answer, which bounds it. Recursive loops are refused: their
// `loop(…)` turns are not seen by the check of the sequence.
func bound(root *nodes.Template, outputs bool) error {
	var refused error
	seen := map[uintptr]bool{}
	done := map[nodes.Node]nodes.Node{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			walk(v.Elem())
		case reflect.Interface:
			if v.IsNil() {
				return
			}
			n, ok := v.Interface().(nodes.Node)
			if !ok {
				walk(v.Elem())
				return
			}
			w, ok := done[n]
			if !ok {
				walk(v.Elem())
				w = checked(n)
				done[n] = w
			}
			if w != n && reflect.TypeOf(w).AssignableTo(v.Type()) {
				v.Set(reflect.ValueOf(w))
			}
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Field(i)
				if !f.CanSet() && f.CanAddr() {
					f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
				}
				walk(f)
			}
			if !v.CanAddr() {
				return
			}
			switch x := v.Addr().Interface().(type) {
			case *controlStructures.ForControlStructure:
				if x.Recursive {
					refused = fmt.Errorf("a recursive loop is not available in Doppel templates: its turns could not be counted")
				}
				at := x.ObjectEvaluator.Position()
				text := &nodes.Integer{Location: at, Val: textOf(x.BodyWrapper)}
				x.ObjectEvaluator = withFilter(x.ObjectEvaluator, loopFilter, text, at)
			case *nodes.Output:
				if mayBeFunction(x.Expression, outputs) {
					x.Expression = withFilter(x.Expression, printFilter, nil, x.Expression.Position())
				}
				if x.Alternative != nil && mayBeFunction(x.Alternative, outputs) {
					x.Alternative = withFilter(x.Alternative, printFilter, nil, x.Alternative.Position())
				}
				if outputs {
					x.Expression = withFilter(x.Expression, sizeFilter, nil, x.Expression.Position())
					if x.Alternative != nil {
						x.Alternative = withFilter(x.Alternative, sizeFilter, nil, x.Alternative.Position())
					}
				}
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				k, e := it.Key(), it.Value()
				n, ok := e.Interface().(nodes.Node)
				if !ok || e.Kind() != reflect.Interface {
					walk(e)
					continue
				}
				w, ok := done[n]
				if !ok {
					walk(reflect.ValueOf(n))
					w = checked(n)
					done[n] = w
				}
				if w != n {
					v.SetMapIndex(k, reflect.ValueOf(w))
				}
			}
		}
	}
	walk(reflect.ValueOf(root))
	return refused
}

// textOf is the bytes of literal text in w, nested blocks included.
func textOf(w *nodes.Wrapper) int {
	n := 0
	var count func(v reflect.Value)
	count = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				count(v.Elem())
			}
		case reflect.Struct:
			if !v.CanAddr() {
				return
			}
			if d, ok := v.Addr().Interface().(*nodes.Data); ok {
				n += len(d.Data.Val)
				return
			}
			for i := range v.NumField() {
				if f := v.Field(i); f.Kind() == reflect.Slice || f.Kind() == reflect.Pointer || f.Kind() == reflect.Interface {
					if v.Type().Field(i).IsExported() {
						count(f)
					}
				}
			}
		case reflect.Slice:
			for i := range v.Len() {
				count(v.Index(i))
			}
		}
	}
	if w != nil {
		count(reflect.ValueOf(w))
	}
	return n
}

// checked is n with its check, or n itself when it needs none.
func checked(n nodes.Node) nodes.Node {
	switch x := n.(type) {
	case *nodes.BinaryExpression:
		switch x.Operator.Token.Type {
		case tokens.Addition, tokens.Subtraction, tokens.Multiply, tokens.Division,
			tokens.FloorDivision, tokens.Modulo, tokens.Power:
			at := x.Operator.Token
			op := &nodes.String{Location: at, Val: at.Val}
			return withFilter(x.Left, arithFilter, op, at, x.Right)
		case tokens.Tilde:
			return withFilter(x, sizeFilter, nil, x.Operator.Token)
		case tokens.Equals, tokens.Ne, tokens.LowerThan, tokens.LowerThanOrEqual,
			tokens.GreaterThan, tokens.GreaterThanOrEqual, tokens.In:
			x.Left = withFilter(x.Left, readFilter, nil, x.Operator.Token)
			x.Right = withFilter(x.Right, readFilter, nil, x.Operator.Token)
		}
	case *nodes.UnaryExpression:
		if x.Negative {
			return withFilter(x.Term, negateFilter, nil, x.Operator)
		}
	case *nodes.TestExpression:
		x.Expression = withFilter(x.Expression, readFilter, nil, x.Test.Token)
		for i, a := range x.Test.Args {
			x.Test.Args[i] = withFilter(a, readFilter, nil, x.Test.Token)
		}
		// gonja hands a test an operand that failed as a value (`is
		// string` of an error is false): the check after the test fails
		// the expression once the budget is spent.
		return withFilter(x, sizeFilter, nil, x.Test.Token)
	case *nodes.GetSlice:
		if e, ok := x.Node.(nodes.Expression); ok {
			x.Node = withFilter(e, textFilter, nil, x.Location)
		}
	case *nodes.GetItem:
		if e, ok := x.Node.(nodes.Expression); ok {
			x.Node = withFilter(e, textFilter, nil, x.Location)
		}
	case *nodes.Call:
		// A method reads its receiver (`big.count("x")`): the check after
		// the call reads it again, to charge it, when that is free of
		// effects.
		var receiver nodes.Expression
		if p, ok := x.Parent.(nodes.Expression); ok && pure(p) {
			receiver = p
		}
		return withFilter(x, sizeFilter, receiver, x.Position())
	case *nodes.List, *nodes.Tuple, *nodes.Dict:
		e := x.(nodes.Expression)
		return withFilter(e, sizeFilter, nil, e.Position())
	}
	return n
}

// pure reports whether evaluating n twice does nothing more than once: a
// name, a literal, or an attribute or item of one.
func pure(n nodes.Node) bool {
	switch x := n.(type) {
	case *nodes.Name, *nodes.String, *nodes.Integer, *nodes.Float, *nodes.Bool, *nodes.None:
		return true
	case *nodes.GetAttribute:
		return pure(x.Node)
	case *nodes.GetItem:
		return pure(x.Node) && pure(x.Arg)
	case *nodes.FilteredExpression: // a check of the rewrite
		return len(x.Filters) == 1 && strings.HasPrefix(x.Filters[0].Name, "_doppel_") && len(x.Filters[0].Args) == 0 && pure(x.Expression)
	}
	return false
}

func withFilter(e nodes.Expression, filter string, arg nodes.Expression, at *tokens.Token, more ...nodes.Expression) *nodes.FilteredExpression {
	call := &nodes.FilterCall{Token: at, Name: filter, Kwargs: map[string]nodes.Expression{}}
	if arg != nil {
		call.Args = append([]nodes.Expression{arg}, more...)
	}
	return &nodes.FilteredExpression{Expression: e, Filters: []*nodes.FilterCall{call}}
}
