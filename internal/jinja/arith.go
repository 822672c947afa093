package jinja

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Arithmetic gives the number Jinja2 gives, or an error: gonja computes
// integers in Go's int, where a sum past the largest wraps round to a
// negative, and powers and quotients in float64, where `2 ** 100000` is
// +Inf and `1 / 0` too. Templates compute with 64-bit integers: a result
// beyond them is an error naming the bound, never a wrapped or rounded
// number, and no operation yields inf or nan. The rewrite (bounds.go)
// turns every `a op b` into `a | _doppel_arith("op", b)`, and `-a` into
// `a | _doppel_negate`.
//
// Where Jinja2 and gonja agree on what the operands mean (a string and a
// number added are gonja's concatenation, a string read as a number where
// gonja reads one), gonja's meaning is kept; where gonja gives a wrong
// number Jinja2 does not, Jinja2's is taken: `//` floors (-7 // 2 is -4),
// `%` takes the divisor's sign (-7 % 2 is 1) and keeps fractions, `**` of
// integers is an integer, and a list repeated (`[1] * 3`, `3 * "ab"`) is
// the repetition, bounded like any value made.

const (
	arithFilter  = "_doppel_arith"
	negateFilter = "_doppel_negate"
)

// errIntRange names the bound of template integers.
func errIntRange(op string) error {
	return fmt.Errorf("`%s` would give an integer beyond ±%d, the bound of the 64-bit integers templates compute with", op, math.MaxInt64)
}

func errNotFinite(op string, f float64) error {
	return fmt.Errorf("`%s` would give %v, which is not a number a template can use", op, f)
}

var errByZero = errors.New("division by zero")

// arith is `left op right`, with op and right its arguments.
func arith(e *exec.Evaluator, left *exec.Value, params *exec.VarArgs) *exec.Value {
	if left.IsError() {
		return left
	}
	op, right := params.Args[0].String(), params.Args[1]
	if right.IsError() {
		return right
	}
	if op == "*" {
		return times(e, left, right)
	}
	if op == "+" && (left.IsList() || right.IsList() || (!left.IsFloat() && !right.IsFloat() && (left.IsString() || right.IsString()))) {
		return plus(e, left, right)
	}
	v, err := number(op, left, right)
	if err != nil {
		return exec.AsValue(err)
	}
	return exec.AsValue(v)
}

// number is a numeric `left op right`: integers when neither is a float
// (gonja reads a string of digits as an integer here), else floats.
func number(op string, left, right *exec.Value) (any, error) {
	if left.IsFloat() || right.IsFloat() || (op == "/") {
		return floats(op, left.Float(), right.Float())
	}
	return ints(op, left.Integer(), right.Integer())
}

func ints(op string, a, b int) (any, error) {
	var r int
	ok := true
	switch op {
	case "+":
		r = a + b
		ok = (b >= 0) == (r >= a)
	case "-":
		r = a - b
		ok = (b >= 0) == (r <= a)
	case "*":
		r, ok = mul(a, b)
	case "//":
		if b == 0 {
			return nil, errByZero
		}
		if a == math.MinInt64 && b == -1 {
			return nil, errIntRange(op)
		}
		r = a / b
		if a%b != 0 && (a < 0) != (b < 0) {
			r--
		}
	case "%":
		if b == 0 {
			return nil, errByZero
		}
		if b == -1 {
			return 0, nil // the remainder of MinInt64 too, which Go cannot divide
		}
		r = a % b
		if r != 0 && (r < 0) != (b < 0) {
			r += b
		}
	case "**":
		if b < 0 {
			return floats(op, float64(a), float64(b))
		}
		r, ok = power(a, b)
	default:
		return nil, fmt.Errorf("unknown operator %q", op)
	}
	if !ok {
		return nil, errIntRange(op)
	}
	return r, nil
}

func uabs(a int) uint64 {
	if a < 0 {
		return uint64(-(a + 1)) + 1
	}
	return uint64(a)
}

// power is a**b for b >= 0, by squaring, and whether it fits.
func power(a, b int) (int, bool) {
	switch a {
	case 0, 1:
		if b == 0 {
			return 1, true
		}
		return a, true
	case -1:
		return 1 - 2*(b&1), true
	}
	r, base := 1, a
	for ok := true; ; {
		if b&1 == 1 {
			if r, ok = mul(r, base); !ok {
				return 0, false
			}
		}
		if b >>= 1; b == 0 {
			return r, true
		}
		if base, ok = mul(base, base); !ok {
			return 0, false
		}
	}
}

// mul is a*b, and whether it fits.
func mul(a, b int) (int, bool) {
	hi, lo := bits.Mul64(uabs(a), uabs(b))
	neg := (a < 0) != (b < 0)
	return a * b, hi == 0 && (lo <= math.MaxInt64 || (neg && lo == 1<<63))
}

func floats(op string, a, b float64) (any, error) {
	var r float64
	switch op {
	case "+":
		r = a + b
	case "-":
		r = a - b
	case "*":
		r = a * b
	case "/":
		if b == 0 {
			return nil, errByZero
		}
		r = a / b
	case "//":
		if b == 0 {
			return nil, errByZero
		}
		r = math.Floor(a / b)
	case "%":
		if b == 0 {
			return nil, errByZero
		}
		r = math.Mod(a, b)
		if r != 0 && (r < 0) != (b < 0) {
			r += b
		}
	case "**":
		if a == 0 && b < 0 {
			return nil, errByZero
		}
		r = math.Pow(a, b)
	default:
		return nil, fmt.Errorf("unknown operator %q", op)
	}
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return nil, errNotFinite(op, r)
	}
	return r, nil
}

// negate is `-in`: gonja's, but the negation of the smallest integer,
// which has none, is an error rather than itself.
func negate(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	switch {
	case in.IsError():
		return in
	case in.IsFloat():
		return exec.AsValue(-in.Float())
	case in.IsInteger():
		if in.Integer() == math.MinInt64 {
			return exec.AsValue(errIntRange("-"))
		}
		return exec.AsValue(-in.Integer())
	}
	return exec.AsValue(errors.New("a minus sign on a value that is not a number"))
}

// times is `left * right`: a string or list repeated, its size checked
// before it is made, or a product.
func times(e *exec.Evaluator, left, right *exec.Value) *exec.Value {
	seq, n := left, right
	if !left.IsFloat() && !left.IsString() && !left.IsList() && (right.IsString() || right.IsList()) {
		seq, n = right, left // 3 * "ab", as Python reads it
	}
	switch {
	case left.IsFloat() || right.IsFloat():
		v, err := floats("*", left.Float(), right.Float())
		if err != nil {
			return exec.AsValue(err)
		}
		return exec.AsValue(v)
	case seq.IsString():
		count := max(n.Integer(), 0)
		size := product(len(seq.String()), count)
		if size > MaxOutput {
			return exec.AsValue(tooBig("`*`", size))
		}
		if err := spend(e, 0, size+stringMem, 0); err != nil {
			return exec.AsValue(err)
		}
		return exec.AsValue(strings.Repeat(seq.String(), count))
	case seq.IsList():
		return repeat(e, seq, max(n.Integer(), 0))
	}
	v, err := ints("*", left.Integer(), right.Integer())
	if err != nil {
		return exec.AsValue(err)
	}
	return exec.AsValue(v)
}

// repeat is a list n times, its weight and memory checked before it is
// made: every item of the copy refers to the original's.
func repeat(e *exec.Evaluator, list *exec.Value, n int) *exec.Value {
	items := length(list)
	w, _, _ := weigh(list.Interface())
	if size := product(w, n); size > MaxOutput {
		return exec.AsValue(tooBig("`*`", size))
	}
	mem := productUpTo(items, n, MaxBytes/slotMem)
	if mem > MaxBytes/slotMem {
		return exec.AsValue(tooBig("`*`", mem))
	}
	if err := spend(e, 0, sliceMem+mem*slotMem, 0); err != nil {
		return exec.AsValue(err)
	}
	out := make([]any, 0, items*n)
	for range n {
		list.Iterate(func(_, _ int, key, _ *exec.Value) bool {
			out = append(out, key.Interface())
			return true
		}, func() {})
	}
	return exec.AsValue(out)
}

// plus is `+` of lists (their concatenation) or strings, checked before
// it is made.
func plus(e *exec.Evaluator, left, right *exec.Value) *exec.Value {
	if left.IsList() || right.IsList() {
		if !left.IsList() || !right.IsList() {
			return exec.AsValue(errors.New("a list can only be added to a list"))
		}
		lw, _, _ := weigh(left.Interface())
		rw, _, _ := weigh(right.Interface())
		if lw+rw > MaxOutput {
			return exec.AsValue(tooBig("`+`", lw+rw))
		}
		n := length(left) + length(right)
		if err := spend(e, 0, sliceMem+n*slotMem, 0); err != nil {
			return exec.AsValue(err)
		}
		out := make([]any, 0, n)
		for _, l := range []*exec.Value{left, right} {
			l.Iterate(func(_, _ int, key, _ *exec.Value) bool {
				out = append(out, key.Interface())
				return true
			}, func() {})
		}
		return exec.AsValue(out)
	}
	l, r := left.String(), right.String()
	if len(l)+len(r) > MaxOutput {
		return exec.AsValue(tooBig("`+`", len(l)+len(r)))
	}
	if err := spend(e, 0, len(l)+len(r)+stringMem, 0); err != nil {
		return exec.AsValue(err)
	}
	return exec.AsValue(l + r)
}

// summed is gonja's sum with the sum of integers exact: gonja adds in
// float64 and converts a whole result back, which rounds past 2**53 and
// makes 9223372036854775807 + 1 the smallest integer. A sum of integers
// beyond 64 bits is an error; one with floats that no integer holds is
// the float, as in Jinja2.
func summed(sum, mapped exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		attribute, start := params.KwArgs["attribute"], params.KwArgs["start"] // before gonja takes them
		out := sum(e, in, params)
		if out.IsError() || !out.IsInteger() {
			return out
		}
		items := in
		if a := attribute; a != nil && !a.IsNil() {
			items = mapped(e, in, &exec.VarArgs{KwArgs: map[string]*exec.Value{"attribute": a}})
			if items.IsError() {
				return items
			}
		}
		total, fraction, floats := 0, 0.0, false
		if s := start; s != nil {
			if s.IsFloat() {
				floats, fraction = true, s.Float()
			} else {
				total = s.Integer()
			}
		}
		var err error
		items.Iterate(func(_, _ int, key, _ *exec.Value) bool {
			switch {
			case !key.IsNumber():
			case key.IsFloat():
				floats = true
				fraction += key.Float()
			default:
				v, e := ints("+", total, key.Integer())
				if e != nil {
					err = fmt.Errorf("the sum would be an integer beyond ±%d, the bound of the 64-bit integers templates compute with", math.MaxInt64)
					return false
				}
				total = v.(int)
			}
			return true
		}, func() {})
		switch {
		case err != nil:
			return exec.AsValue(err)
		case floats:
			if f := float64(total) + fraction; math.Abs(f) >= 1<<63 {
				return exec.AsValue(f)
			}
			return out
		}
		return exec.AsValue(total)
	}
}
