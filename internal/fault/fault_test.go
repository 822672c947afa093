package fault

import (
	"testing"
	"time"
)

type fixed float64

func (f fixed) Float64(Key) float64 { return float64(f) }

type byRoll map[Roll]float64

func (b byRoll) Float64(k Key) float64 { return b[k.Roll] }

func TestFires(t *testing.T) {
	cases := []struct {
		p, roll float64
		want    bool
	}{
		{0, 0, false}, {0, 0.999, false}, {1, 0.999, true}, {1, 0, true},
		{0.5, 0.49, true}, {0.5, 0.5, false}, {0.1, 0.0999, true}, {0.1, 0.1, false},
	}
	for _, c := range cases {
		if got := Fires(fixed(c.roll), Key{}, c.p); got != c.want {
			t.Errorf("Fires(p=%v, roll=%v) = %v", c.p, c.roll, got)
		}
	}
}

func TestLossAndReplace(t *testing.T) {
	var none *Loss
	if none.Fires(fixed(0), Key{}) {
		t.Fatal("no loss fired")
	}
	l := &Loss{Percentage: 0.3, Status: 503}
	if !l.Fires(byRoll{RollLoss: 0.2}, Key{}) || l.Fires(byRoll{RollLoss: 0.3}, Key{}) {
		t.Fatal("loss does not roll its own draw")
	}
	if !Replace(0.5).Fires(byRoll{RollReplace: 0.1, RollLoss: 0.9}, Key{}) {
		t.Fatal("replace does not roll its own draw")
	}
}

func TestLatencyTarget(t *testing.T) {
	var none *Latency
	if _, ok := none.Target(fixed(0), Key{}); ok {
		t.Fatal("no latency fired")
	}
	l := &Latency{Percentage: 0.5, Min: 200 * time.Millisecond, Max: 400 * time.Millisecond}
	if _, ok := l.Target(byRoll{RollLatency: 0.5}, Key{}); ok {
		t.Fatal("latency fired at the share")
	}
	for _, draw := range []float64{0, 0.25, 0.5, 0.999999999} {
		d, ok := l.Target(byRoll{RollLatency: 0.1, RollLatencyDraw: draw}, Key{})
		if !ok || d < l.Min || d > l.Max {
			t.Errorf("draw %v gave %v (%v), want within [%v, %v]", draw, d, ok, l.Min, l.Max)
		}
	}
	if d, _ := l.Target(byRoll{RollLatency: 0.1, RollLatencyDraw: 0.5}, Key{}); d != 300*time.Millisecond {
		t.Errorf("the draw is not uniform over [min, max]: %v", d)
	}
	fixedDelay := &Latency{Percentage: 1, Min: time.Second, Max: time.Second}
	if d, ok := fixedDelay.Target(fixed(0.7), Key{}); !ok || d != time.Second {
		t.Errorf("min == max gave %v", d)
	}
}

// go test ./internal/fault -run '^$' -bench . -benchmem
func BenchmarkRolls(b *testing.B) {
	loss := &Loss{Percentage: 0.1, Status: 503}
	lat := &Latency{Percentage: 0.5, Min: time.Millisecond, Max: 5 * time.Millisecond}
	k := Key{Proxy: "zeta", RequestID: "0d7e9a2c-5b1f-4c9e-8a43-2f6d1b7c9e01"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = Replace(0.5).Fires(Random{}, k)
			_ = loss.Fires(Random{}, k)
			_, _ = lat.Target(Random{}, k)
		}
	})
}

func TestSeededRollsArePureFunctions(t *testing.T) {
	a, b, other := NewSeeded("ci-42"), NewSeeded("ci-42"), NewSeeded("ci-43")
	differs := 0
	sum := 0.0
	for i := range 2000 {
		k := Key{Proxy: "zeta", Mock: "mm", RequestID: "req-" + string(rune('a'+i%26)) + string(rune(i)), Roll: Roll(1 + i%4)}
		x, y := a.Float64(k), b.Float64(k)
		if x != y {
			t.Fatalf("the same key rolled %v and %v", x, y)
		}
		if x < 0 || x >= 1 {
			t.Fatalf("out of [0, 1): %v", x)
		}
		if other.Float64(k) != x {
			differs++
		}
		sum += x
	}
	if differs < 1990 {
		t.Fatalf("another seed gave the same roll %d times in 2000", 2000-differs)
	}
	if mean := sum / 2000; mean < 0.45 || mean > 0.55 {
		t.Fatalf("mean %v: the rolls are not uniform", mean)
	}
	k := Key{Proxy: "zeta", RequestID: "r1", Roll: RollLoss}
	for _, changed := range []Key{
		{Proxy: "alpha", RequestID: "r1", Roll: RollLoss},
		{Proxy: "zeta", Mock: "m", RequestID: "r1", Roll: RollLoss},
		{Proxy: "zeta", RequestID: "r2", Roll: RollLoss},
		{Proxy: "zeta", RequestID: "r1", Roll: RollLatency},
	} {
		if a.Float64(changed) == a.Float64(k) {
			t.Errorf("%+v rolls like %+v", changed, k)
		}
	}
}
