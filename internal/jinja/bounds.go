package jinja

import (
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// Rendering is bounded where a template turns a small number into a large
// value: a string repeated (`"-" * n`), a width (`center`, `indent`,
// `format`, the string methods `ljust`, `rjust`, `zfill`, `expandtabs`), a
// separator or replacement repeated (`join`, `replace`), a count of groups
// (`batch`, `slice`) or of items (`range`, `lipsum`). The number may come
// from the request (`?n=99999999999` is a string gonja reads as an
// integer), so each is checked before anything is allocated, and a value
// over the bound is the template's error (500 TEMPLATE_RENDER_ERROR), not
// an exhausted process. Every filter's result is also held to MaxOutput, so
// chaining filters that grow their input cannot multiply past it.

// MaxRange bounds the items one call of range() yields, as Jinja2's own
// sandbox does.
const MaxRange = 100_000

// maxIndent bounds tojson's indent: the output grows by it on every line.
const maxIndent = 64

// maxWords bounds the words lipsum writes.
const maxWords = 100_000

// timesFilter is what `left * right` is rewritten to: the product with its
// size checked first.
const timesFilter = "_doppel_times"

func tooBig(what string, size int) error {
	return fmt.Errorf("%s would make %d bytes or items, over the %d MiB rendering bound", what, size, MaxOutput>>20)
}

// product is a*b, or MaxOutput+1 when that is larger or overflows.
func product(a, b int) int {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > (MaxOutput+1)/b {
		return MaxOutput + 1
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
		n, _ := intArg(params, 0, "linecount")
		return countBound(n)
	},
	"slice": func(in *exec.Value, params *exec.VarArgs) int {
		n, _ := intArg(params, 0, "slices")
		return countBound(n)
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
		return widths(in.String())
	},
}

// countBound maps a count of groups or items over MaxRange past the
// bound, so that it is refused like a size.
func countBound(n int) int {
	if n > MaxRange {
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

// boundedFilter checks a filter's result against MaxOutput, and its size
// beforehand when a sizer knows how.
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
		out := f(e, in, params)
		if out.IsString() && len(out.String()) > MaxOutput {
			return exec.AsValue(tooBig(name, len(out.String())))
		}
		return out
	}
}

// times is `left * right` as gonja computes it, with a string repetition
// checked first.
func times(_ *exec.Evaluator, left *exec.Value, params *exec.VarArgs) *exec.Value {
	if left.IsError() {
		return left
	}
	right := params.Args[0]
	switch {
	case left.IsFloat() || right.IsFloat():
		return exec.AsValue(left.Float() * right.Float())
	case left.IsString():
		n := right.Integer()
		if n < 0 {
			n = 0
		}
		if size := product(len(left.String()), n); size > MaxOutput {
			return exec.AsValue(tooBig("`*`", size))
		}
		return exec.AsValue(strings.Repeat(left.String(), n))
	default:
		return exec.AsValue(left.Integer() * right.Integer())
	}
}

func boundedFilters() *exec.FilterSet {
	set := exec.NewFilterSet(map[string]exec.FilterFunction{})
	set.Update(gonja.DefaultEnvironment.Filters)
	for _, name := range keys(set, "filters") {
		f, _ := set.Get(name)
		_ = set.Replace(name, boundedFilter(name, f))
	}
	_ = set.Register(timesFilter, times)
	return set
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
	"format":     func(self string, params *exec.VarArgs) int { return widths(self) },
	"format_map": func(self string, params *exec.VarArgs) int { return widths(self) },
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

// boundedGlobals are gonja's global functions and variables, with range
// and lipsum bounded.
func boundedGlobals() *exec.Context {
	globals := exec.EmptyContext().Update(gonja.DefaultEnvironment.Context)
	rangeFn, _ := gonja.DefaultEnvironment.Context.Get("range")
	original := rangeFn.(func(*exec.Evaluator, *exec.VarArgs) (<-chan int, error))
	globals.Set("range", func(e *exec.Evaluator, params *exec.VarArgs) (<-chan int, error) {
		if n := rangeLength(params); n > MaxRange {
			return nil, fmt.Errorf("range() would yield %d items, over the bound of %d", n, MaxRange)
		}
		return original(e, params)
	})
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

// rangeLength is how many items range(params) yields; 0 when the
// arguments are not integers (range itself reports that).
func rangeLength(params *exec.VarArgs) int {
	ints := make([]int, len(params.Args))
	for i, a := range params.Args {
		if !a.IsInteger() {
			return 0
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
		return 0
	}
	switch {
	case step > 0 && stop > start:
		return int((uint64(stop-start) + uint64(step) - 1) / uint64(step))
	case step < 0 && start > stop:
		return int((uint64(start-stop) + uint64(-step) - 1) / uint64(-step))
	}
	return 0
}

// boundRepetitions rewrites every `left * right` of the template into
// `left | _doppel_times(right)`, which checks the size of a string
// repetition before making it. gonja's evaluator has no hook for
// operators, so the parsed tree is changed instead: the rewrite reaches
// every expression held in an exported field of a node (outputs,
// conditions, loops, filter and call arguments, `do`), not those gonja's
// `set`, `with` and `{% filter %}` keep in unexported fields.
func boundRepetitions(root *nodes.Template) {
	seen := map[uintptr]bool{}
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
			if b, ok := v.Interface().(*nodes.BinaryExpression); ok && b.Operator.Token.Type == tokens.Multiply && v.CanSet() {
				walk(reflect.ValueOf(b))
				v.Set(reflect.ValueOf(rewriteTimes(b)))
				return
			}
			walk(v.Elem())
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			for _, k := range v.MapKeys() {
				e := v.MapIndex(k)
				if e.Kind() == reflect.Interface && !e.IsNil() {
					if b, ok := e.Interface().(*nodes.BinaryExpression); ok && b.Operator.Token.Type == tokens.Multiply {
						walk(reflect.ValueOf(b))
						v.SetMapIndex(k, reflect.ValueOf(rewriteTimes(b)))
						continue
					}
				}
				walk(e)
			}
		}
	}
	walk(reflect.ValueOf(root))
}

func rewriteTimes(b *nodes.BinaryExpression) nodes.Expression {
	return &nodes.FilteredExpression{
		Expression: b.Left,
		Filters: []*nodes.FilterCall{{
			Token:  b.Operator.Token,
			Name:   timesFilter,
			Args:   []nodes.Expression{b.Right},
			Kwargs: map[string]nodes.Expression{},
		}},
	}
}
