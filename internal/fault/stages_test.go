package fault

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/config"
)

// recorder is an Exchange that remembers what faults did to it.
type recorder struct {
	*httptest.ResponseRecorder
	code    apierr.Code
	delay   time.Duration
	wrapped int
	fired   []string
	cut     bool
	hung    time.Duration
	req     *http.Request
	counted Where
	grpc    int
}

func (r *recorder) Fired(name, _ string) { r.fired = append(r.fired, name) }
func (r *recorder) Counted(w Where)      { r.counted = w }
func (r *recorder) Cut(bool)             { r.cut = true }
func (r *recorder) Hang(d time.Duration) { r.hung = d }
func (r *recorder) Context() context.Context {
	return context.Background()
}
func (r *recorder) Request() *http.Request { return r.req }

func (r *recorder) Fail(status int, code apierr.Code, message string) {
	r.code = code
	apierr.WriteStatus(r, status, code, message)
}
func (r *recorder) FailGRPC(status int, _ string) {
	r.grpc = status
	r.Header().Set("Grpc-Status", fmt.Sprint(status))
	r.WriteHeader(http.StatusOK)
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
	if fmt.Sprint(names) != "[loss abort hang bandwidth latency]" {
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
	// The window is exact: order-2 is remembered while fewer than
	// MaxAttemptIDs newer ids have come, forgotten once that many have.
	for i := range MaxAttemptIDs - 1 {
		a.Next(fmt.Sprintf("flood-%d", i))
	}
	if a.Next("order-2") != 1 {
		t.Fatal("an id was forgotten before MaxAttemptIDs newer ones came")
	}
	a.Next("flood-last")
	if a.Next("order-2") != 0 {
		t.Fatal("an id was remembered after MaxAttemptIDs newer ones came")
	}
	// Far more ids than are remembered: what is held stays bounded.
	for i := range 3 * MaxAttemptIDs {
		a.Next(fmt.Sprintf("more-%d", i))
	}
	held := 0
	for i := range a.shards {
		held += len(a.shards[i].seen)
	}
	if held > 2*MaxAttemptIDs {
		t.Fatalf("%d ids held, bound %d", held, MaxAttemptIDs)
	}
}

// TestAttemptsAreTheSameInEveryProcess: two memories fed the same ids in
// the same order count the same attempts, id for id, also past the window.
func TestAttemptsAreTheSameInEveryProcess(t *testing.T) {
	a, b := NewAttempts(), NewAttempts()
	for i := range 3 * MaxAttemptIDs {
		id := fmt.Sprintf("id-%d", (i*7919)%(MaxAttemptIDs+MaxAttemptIDs/2))
		if x, y := a.Next(id), b.Next(id); x != y {
			t.Fatalf("request %d (%s): attempt %d here, %d there", i, id, x, y)
		}
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

// TestFirstAttemptsRollAsBefore pins seeded draws of first attempts to the
// values they had before attempts were counted (computed with that
// version): a seed replays the same first answers across versions.
func TestFirstAttemptsRollAsBefore(t *testing.T) {
	s := NewSeeded("ci-1234")
	for _, c := range []struct {
		k    Key
		want float64
	}{
		{Key{Proxy: "zeta", RequestID: "run-000", Roll: RollReplace}, 0.7612197379878404},
		{Key{Proxy: "zeta", Mock: "mm", RequestID: "run-000", Roll: RollLoss}, 0.23781659538789213},
		{Key{Proxy: "zeta", RequestID: "run-001", Roll: RollLatency}, 0.6367821440825625},
		{Key{Proxy: "zeta", RequestID: "run-001", Roll: RollLatencyDraw}, 0.4194715975265889},
	} {
		if got := s.Float64(c.k); got != c.want {
			t.Errorf("%+v: %v, want %v", c.k, got, c.want)
		}
	}
}

// go test ./internal/fault -run '^$' -bench Inject -benchmem
func BenchmarkInject(b *testing.B) {
	set := Set{&Loss{Percentage: 0.1, Status: 503}, &Latency{Percentage: 0.5, Min: time.Millisecond, Max: 5 * time.Millisecond}}
	k := Key{Proxy: "zeta", RequestID: "0d7e9a2c-5b1f-4c9e-8a43-2f6d1b7c9e01"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		x := &recorder{ResponseRecorder: httptest.NewRecorder()}
		for pb.Next() {
			x.fired = x.fired[:0]
			set.Inject(Random{}, k, x)
		}
	})
}

// TestEveryConditionHolds: however many faults a set has, each keeps its
// condition; a fault whose condition does not admit the request is not
// rolled, the ninth and the seventieth as the first.
func TestEveryConditionHolds(t *testing.T) {
	yes, err := config.ParsePattern("^yes$")
	if err != nil {
		t.Fatal(err)
	}
	never := NewCondition(&config.When{Headers: map[config.HeaderName]config.Pattern{"X-Never": yes}}, "", "shaper", nil)
	for _, n := range []int{3, 9, 70} {
		var set Set
		for range n - 1 {
			set = append(set, shaper{share: 0}) // never fires
		}
		set = append(set, &conditioned{Fault: shaper{share: 1}, when: never})
		x := &recorder{ResponseRecorder: httptest.NewRecorder(), req: httptest.NewRequest("GET", "/", nil)}
		set.Inject(Random{}, Key{Proxy: "zeta"}, x)
		if len(x.fired) != 0 {
			t.Errorf("a set of %d: the last fault fired although its condition bars the request", n)
		}
	}
}
