package fault

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
)

// recorder is an Exchange that remembers what faults did to it.
type recorder struct {
	*httptest.ResponseRecorder
	code    apierr.Code
	delay   time.Duration
	wrapped int
	fired   []string
}

func (r *recorder) Fired(name string) { r.fired = append(r.fired, name) }

func (r *recorder) Fail(status int, code apierr.Code, message string) {
	r.code = code
	apierr.WriteStatus(r, status, code, message)
}
func (r *recorder) Delay(d time.Duration) { r.delay = d }
func (r *recorder) Wrap(wrap func(http.ResponseWriter) http.ResponseWriter) {
	r.wrapped++
	_ = wrap(r.ResponseRecorder)
}

// shaper is an On fault of the test's.
type shaper struct{ share float64 }

func (shaper) Name() string            { return "shaper" }
func (shaper) Stage() Stage            { return On }
func (s shaper) Roll() (Roll, float64) { return 200, s.share }
func (shaper) Act(x Exchange, _ Draw) {
	x.Wrap(func(w http.ResponseWriter) http.ResponseWriter { return w })
}

func TestInjectRollsInOrderAndStopsAtAnAnswer(t *testing.T) {
	loss := &Loss{Percentage: 0.5, Status: 429}
	lat := &Latency{Percentage: 1, Min: 200 * time.Millisecond, Max: 400 * time.Millisecond}
	set := Set{loss, shaper{share: 1}, lat}
	cases := []struct {
		rolls     byRoll
		fired     string
		status    int
		delay     time.Duration
		wrapped   int
		answering bool
	}{
		// The loss fires: it answers, and nothing after it is rolled.
		{byRoll{RollLoss: 0.1, RollLatencyDraw: 0.5}, "[loss]", 429, 0, 0, true},
		// It does not: the On fault wraps, latency sets its target.
		{byRoll{RollLoss: 0.9, RollLatencyDraw: 0.5}, "[shaper latency]", 200, 300 * time.Millisecond, 1, false},
	}
	for i, c := range cases {
		x := &recorder{ResponseRecorder: httptest.NewRecorder()}
		answered := set.Inject(c.rolls, Key{Proxy: "zeta"}, x)
		fired := x.fired
		if answered != c.answering || fmt.Sprint(fired) != c.fired || x.Code != c.status || x.delay != c.delay || x.wrapped != c.wrapped {
			t.Errorf("case %d: answered %v, fired %v, status %d, delay %v, wrapped %d", i, answered, fired, x.Code, x.delay, x.wrapped)
		}
		if c.answering && x.code != apierr.LossInjected {
			t.Errorf("case %d: the loss answered %q", i, x.code)
		}
	}
}

func TestKindsRollInTheDocumentedOrder(t *testing.T) {
	var names []string
	for _, k := range kinds {
		names = append(names, k.Name)
	}
	if fmt.Sprint(names) != "[loss latency]" {
		t.Fatalf("kinds in roll order: %v", names)
	}
	for _, dup := range []Kind{
		{Name: "loss", Rolls: []Roll{99}},
		{Name: "other", Rolls: []Roll{RollLatencyDraw}},
		{Name: "replace", Rolls: []Roll{RollReplace}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registering %+v was accepted", dup)
				}
			}()
			register(dup)
		}()
	}
}

func TestAttemptsCountEachIDAndForgetTheOldest(t *testing.T) {
	a := NewAttempts()
	for want := range uint32(5) {
		if got := a.Next("order-1"); got != want {
			t.Fatalf("attempt %d of order-1 counted as %d", want, got)
		}
	}
	if a.Next("order-2") != 0 {
		t.Fatal("another id shares the count")
	}
	// Far more ids than are remembered: memory stays bounded, and the
	// first ones are forgotten (their next attempt counts as a first).
	for i := range 3 * MaxAttemptIDs {
		a.Next(fmt.Sprintf("flood-%d", i))
	}
	held := 0
	for i := range a.shards {
		held += len(a.shards[i].seen)
		if len(a.shards[i].order) > perShard {
			t.Fatalf("shard %d holds %d ids", i, len(a.shards[i].order))
		}
	}
	if held > MaxAttemptIDs+attemptShards {
		t.Fatalf("%d ids held, bound %d", held, MaxAttemptIDs)
	}
	if a.Next("order-1") != 0 {
		t.Fatal("the oldest id was not forgotten")
	}
	last := fmt.Sprintf("flood-%d", 3*MaxAttemptIDs-1)
	if a.Next(last) != 1 {
		t.Fatal("the newest id was forgotten")
	}
}

func TestAnAttemptIsARollOfItsOwn(t *testing.T) {
	s := NewSeeded("ci-42")
	k := Key{Proxy: "zeta", RequestID: "r1", Roll: RollLoss}
	seen := map[float64]bool{s.Float64(k): true}
	for a := range uint32(20) {
		k.Attempt = a + 1
		v := s.Float64(k)
		if seen[v] {
			t.Fatalf("attempt %d rolls like an earlier one", k.Attempt)
		}
		seen[v] = true
	}
}

// go test ./internal/fault -run '^$' -bench Attempts -benchmem
func BenchmarkAttempts(b *testing.B) {
	a := NewAttempts()
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = fmt.Sprintf("0d7e9a2c-5b1f-4c9e-8a43-2f6d1b7c%04d", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			a.Next(ids[i%len(ids)])
			i++
		}
	})
}
