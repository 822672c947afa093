package jinja

import (
	"math"
	bigint "math/big"
	"strings"
	"testing"
)

// Arithmetic gives Jinja2's number or an error naming why: never a
// wrapped integer, inf or nan.
func TestArithmeticIsExactOrAnError(t *testing.T) {
	for src, want := range map[string]string{
		`{{ 2 ** 62 }}`:    "4611686018427387904",
		`{{ (-2) ** 63 }}`: "-9223372036854775808",
		`{{ 3 ** 0 }} {{ 0 ** 0 }} {{ 0 ** 5 }} {{ (-1) ** 100001 }} {{ 1 ** 100000 }}`: "1 1 0 -1 1",
		`{{ 2 ** -1 }}`:                             "0.5",
		`{{ 9223372036854775806 + 1 }}`:             "9223372036854775807",
		`{{ -9223372036854775807 - 1 }}`:            "-9223372036854775808",
		`{{ 3037000499 * 3037000499 }}`:             "9223372030926249001",
		`{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 // -2 }}`:  "3 -4 -4",
		`{{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }}`:     "1 2 -2",
		`{{ 7.5 % 2 }} {{ -7.5 // 2 }}`:             "1.5 -4.0",
		`{{ 7 / 2 }} {{ 1.5 * 2 }} {{ 2 - 0.5 }}`:   "3.5 3.0 1.5",
		`{{ -small }} {{ -(2.5) }} {{ -(-small) }}`: "-3 -2.5 3",
		`{{ [1] * 3 }} {{ 2 * [0] }}`:               "[1, 1, 1] [0, 0]",
		`{{ [1] + [2] }} {{ s + "c" }} {{ 1 + 2 }}`: "[1, 2] abc 3",
		`{{ (items * 2) | length }}`:                "6",
		`{{ [9007199254740993, 1] | sum }} {{ [1, 2.5] | sum }} {{ [1, 2] | sum(start=3) }}`: "9007199254740994 3.5 6",
		`{{ [dict(a=9223372036854775806), dict(a=1)] | sum(attribute="a") }}`:                "9223372036854775807",
		`{{ [1e300, 1] | sum }}`: "1e+300",
	} {
		out, err := render(t, src)
		if err != nil || out != want {
			t.Errorf("%s: %q, %v; want %q", src, out, err, want)
		}
	}
	for src, want := range map[string]string{
		`{{ 2 ** 100000 }}`:                      "beyond ±9223372036854775807",
		`{{ 2 ** 63 }}`:                          "beyond ±9223372036854775807",
		`{{ 10 ** (n | int) }}`:                  "beyond ±9223372036854775807",
		`{{ 9223372036854775807 + 1 }}`:          "beyond ±9223372036854775807",
		`{{ -9223372036854775807 - 2 }}`:         "beyond ±9223372036854775807",
		`{{ 3037000500 * 3037000500 }}`:          "beyond ±9223372036854775807",
		`{{ (n | int) * (n | int) }}`:            "beyond ±9223372036854775807",
		`{{ -(-9223372036854775807 - 1) }}`:      "beyond ±9223372036854775807",
		`{{ (-9223372036854775807 - 1) // -1 }}`: "beyond ±9223372036854775807",
		`{{ 1 / 0 }}`:                            "division by zero",
		`{{ 1 // 0 }}`:                           "division by zero",
		`{{ 1 % 0 }}`:                            "division by zero",
		`{{ 1.5 / 0 }}`:                          "division by zero",
		`{{ 0 ** -1 }}`:                          "division by zero",
		`{{ 10.0 ** 400 }}`:                      "+Inf, which is not a number",
		`{{ 1e308 * 10 }}`:                       "+Inf, which is not a number",
		`{{ -1e308 - 1e308 }}`:                   "-Inf, which is not a number",
		`{{ (-8) ** 0.5 }}`:                      "NaN, which is not a number",
		`{{ "inf" | float }}`:                    "+Inf, which is not a number",
		`{{ ("nan" | float) > 1 }}`:              "NaN, which is not a number",
		`{{ [1] * 100000000 }}`:                  "rendering bound",
		`{{ 100000000 * [1] }}`:                  "rendering bound",
		`{{ [9223372036854775807, 1] | sum }}`:   "the sum would be an integer beyond",
		`{{ [dict(a=9223372036854775807), dict(a=1)] | sum(attribute="a") }}`: "the sum would be an integer beyond",
		`{{ [1e308, 1e308] | sum }}`:                                          "+Inf, which is not a number",
		`{{ [1] + 1 }}`:                                                       "a list can only be added to a list",
	} {
		out, err := render(t, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: rendered %q, err %v; want an error saying %q", src, out, err, want)
		}
	}
}

// FuzzIntegerArithmetic: every integer operation gives the exact result
// (math/big's, with Python's floor for // and %) when it fits 64 bits,
// and an error when it does not; `**` is checked for small exponents.
func FuzzIntegerArithmetic(f *testing.F) {
	for _, seed := range [][2]int64{{math.MaxInt64, 1}, {math.MinInt64, -1}, {-7, 2}, {3037000500, 3037000500}, {2, 62}, {-2, 63}, {0, 0}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b int64) {
		x, y := bigint.NewInt(a), bigint.NewInt(b)
		for _, op := range []string{"+", "-", "*", "//", "%", "**"} {
			var want *bigint.Int
			switch op {
			case "+":
				want = new(bigint.Int).Add(x, y)
			case "-":
				want = new(bigint.Int).Sub(x, y)
			case "*":
				want = new(bigint.Int).Mul(x, y)
			case "//", "%":
				if b == 0 {
					continue
				}
				q, m := new(bigint.Int).DivMod(x, y, new(bigint.Int)) // Euclidean: 0 <= m < |y|
				if m.Sign() != 0 && y.Sign() < 0 {
					q.Sub(q, bigint.NewInt(1)) // floor, as Python: the remainder takes the divisor's sign
					m.Add(m, y)
				}
				want = q
				if op == "%" {
					want = m
				}
			case "**":
				if b < 0 || b > 200 {
					continue
				}
				want = new(bigint.Int).Exp(x, y, nil)
			}
			got, err := ints(op, int(a), int(b))
			if want.IsInt64() {
				if err != nil || got != int(want.Int64()) {
					t.Fatalf("%d %s %d: %v, %v; want %s", a, op, b, got, err, want)
				}
			} else if err == nil {
				t.Fatalf("%d %s %d: %v; want an error, the result %s does not fit", a, op, b, got, want)
			}
		}
	})
}
