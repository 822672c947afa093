package jinja

import (
	"reflect"
	"slices"
	"strings"
	"unsafe"

	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/nodes"
)

// implicit are names a template may read that nothing it holds binds:
// what a loop, the engine and the literals provide.
var implicit = []string{"loop", "self", "varargs", "kwargs", "caller", "true", "false", "none", "True", "False", "None"}

// Read is a variable a template reads that the template itself does not
// bind, and where it is first read.
type Read struct {
	Name         string
	Line, Column int
}

// Unbound lists the variables the template reads, outside `default(...)`
// and names it tests with `is defined`/`is undefined`, that neither the
// template (`set`, `for`, `with`), nor the engine (its globals, `loop`),
// nor known (what the request and Doppel bind) can bind: each one fails
// every render. In the order they are first read.
func (t *Template) Unbound(known func(name string) bool) []Read {
	bound := map[string]bool{}
	tested := map[string]bool{}
	var reads []Read
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value, guarded bool)
	names := func(v reflect.Value, into map[string]bool) {
		collect(v, func(n *nodes.Name) { into[n.Name.Val] = true })
	}
	walk = func(v reflect.Value, guarded bool) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			switch x := v.Interface().(type) {
			case *nodes.Name:
				if !guarded {
					reads = append(reads, Read{Name: x.Name.Val, Line: x.Name.Line, Column: x.Name.Col})
				}
				return
			case *nodes.FilteredExpression:
				guard := guarded || slices.ContainsFunc(x.Filters, func(f *nodes.FilterCall) bool { return f.Name == "default" || f.Name == "d" })
				walk(reflect.ValueOf(&x.Expression).Elem(), guard)
				walk(reflect.ValueOf(x.Filters), guarded)
				return
			case *nodes.TestExpression:
				if x.Test != nil && (x.Test.Name == "defined" || x.Test.Name == "undefined") {
					names(reflect.ValueOf(&x.Expression).Elem(), tested)
					walk(reflect.ValueOf(&x.Expression).Elem(), true)
					return
				}
			case *controlStructures.ForControlStructure:
				bound[x.Key] = true
				bound[x.Value] = true
			case *controlStructures.SetControlStructure:
				// A name set is bound, not read (`ns.x` reads ns).
				if f := field(v.Elem(), "target"); f.IsValid() && !f.IsNil() {
					if n, ok := f.Interface().(*nodes.Name); ok {
						bound[n.Name.Val] = true
						seen[reflect.ValueOf(n).Pointer()] = true
					}
				}
			case *controlStructures.WithControlStructure:
				if f := field(v.Elem(), "pairs"); f.IsValid() {
					for _, k := range f.MapKeys() {
						bound[k.String()] = true
					}
				}
			}
			walk(v.Elem(), guarded)
		case reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem(), guarded)
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if f := settable(v.Field(i)); f.IsValid() {
					walk(f, guarded)
				}
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), guarded)
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(it.Value(), guarded)
			}
		}
	}
	walk(reflect.ValueOf(t.t.Root()), false)
	var out []Read
	reported := map[string]bool{}
	for _, r := range reads {
		n := r.Name
		if bound[n] || tested[n] || reported[n] || known(n) || slices.Contains(implicit, n) ||
			Environment.Context.Has(n) || strings.HasPrefix(n, "_doppel_") {
			continue
		}
		reported[n] = true
		out = append(out, r)
	}
	return out
}

// collect calls fn for every name in v's tree.
func collect(v reflect.Value, fn func(*nodes.Name)) {
	visit(v, map[uintptr]bool{}, func(p reflect.Value) bool {
		if n, ok := p.Interface().(*nodes.Name); ok {
			fn(n)
			return false
		}
		return true
	})
}

// visit walks v's tree, unexported fields included, calling fn on every
// non-nil pointer once; fn says whether to go below it.
func visit(v reflect.Value, seen map[uintptr]bool, fn func(reflect.Value) bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		if fn(v) {
			visit(v.Elem(), seen, fn)
		}
	case reflect.Interface:
		if !v.IsNil() {
			visit(v.Elem(), seen, fn)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := settable(v.Field(i)); f.IsValid() {
				visit(f, seen, fn)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			visit(v.Index(i), seen, fn)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			visit(it.Value(), seen, fn)
		}
	}
}

// settable is a struct field as a readable value, unexported or not (the
// same reach bound() takes into gonja's control structures).
func settable(f reflect.Value) reflect.Value {
	if !f.CanSet() && f.CanAddr() {
		return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	}
	return f
}

func field(v reflect.Value, name string) reflect.Value {
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	f := v.FieldByName(name)
	if !f.IsValid() {
		return f
	}
	return settable(f)
}
