package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/doppelproxy/doppel/client"
	"github.com/doppelproxy/doppel/internal/store/pgtest"
)

// sseEvent is one event a test read of a stream.
type sseEvent struct{ name, id, data string }

// sseReader reads a stream's events as they come.
type sseReader struct {
	t      *testing.T
	events chan sseEvent
	cancel context.CancelFunc
	body   io.Closer
}

// openSSE opens GET url with header (name, value pairs): 200, or the
// test fails.
func openSSE(t *testing.T, url string, header ...string) *sseReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		cancel()
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	s := &sseReader{t: t, events: make(chan sseEvent, 1024), cancel: cancel, body: res.Body}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 8<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev != (sseEvent{}) {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *sseReader) close() {
	s.cancel()
	_ = s.body.Close()
}

// next is the next event of a name in names (any when none), the ids of
// those passed over kept in last; the test fails when none comes within
// 15 s.
func (s *sseReader) next(last *string, names ...string) sseEvent {
	s.t.Helper()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatal("the stream ended")
			}
			if ev.id != "" && last != nil {
				*last = ev.id
			}
			if len(names) == 0 || slices.Contains(names, ev.name) {
				return ev
			}
		case <-deadline.C:
			s.t.Fatalf("no event %v within 15 s", names)
		}
	}
}

// streamed is an entry of a fleet's stream.
type streamed struct {
	Replica, Path string
}

func entryOf(t *testing.T, ev sseEvent) streamed {
	t.Helper()
	var e streamed
	if err := json.Unmarshal([]byte(ev.data), &e); err != nil || e.Replica == "" {
		t.Fatalf("an entry of the stream: %q", ev.data)
	}
	if !strings.HasPrefix(ev.id, e.Replica+":") {
		t.Fatalf("the event of an entry of %s has the id %q", e.Replica, ev.id)
	}
	return e
}

type replicasEvent struct {
	Answered []string
	Missing  []struct{ ID, State, Error string }
}

func replicasOfEvent(t *testing.T, ev sseEvent) replicasEvent {
	t.Helper()
	var r replicasEvent
	if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
		t.Fatalf("the event replicas: %q", ev.data)
	}
	return r
}

// TestTheStreamFollowsTheFleet: the journal's stream asked of one replica
// relays every live replica's entries as they arrive, each saying its
// replica, and says which replicas it follows (SPEC §18.1). An EventSource
// that reconnects to another replica with the last id it got loses
// nothing and repeats nothing of any replica; a replica that joins is
// followed within a heartbeat, its first entries included; one killed is
// said missing; one that answers garbage is missing from the start. The
// command line's tail has the replica column.
func TestTheStreamFollowsTheFleet(t *testing.T) {
	t.Parallel()
	// The upstream holds /slow until released: a request in flight when
	// the client's last event was sent, recorded after it.
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "slow")
	}))
	defer slow.Close()
	url, _ := publicFleet(t, `proxies:
  - name: shop
    type: http
    url: `+slow.URL+`
    mocks:
      - {name: hit, request: {method: GET, url: "^/hit"}, response: {status: 200, body: hit}}
`)
	key := map[string]string{"DOPPEL_FLEET_KEY": strings.Repeat("5a6b7c8d", 5)}
	type replica struct {
		p                *proc
		proxy, admin, id string
	}
	start := func() replica {
		p, admin, id, _ := fleetReplica(t, url, key)
		proxy := "http://" + lineField(p.waitLine("the startup line", startTimeout, func(l string) bool { return lineMsg(l) == msgServing }), "proxy_addr")
		return replica{p, proxy, admin, id}
	}
	a, b, c := start(), start(), start()
	hit := func(r replica, path string) {
		t.Helper()
		if got := call(t, "GET", r.proxy+path, ""); got.status != 200 {
			t.Fatalf("GET %s: %d", path, got.status)
		}
	}
	// Entries from before the stream opens are not what it sends.
	hit(a, "/hit/before-a")
	hit(b, "/hit/before-b")
	hit(c, "/hit/before-c")

	s := openSSE(t, a.admin+"/api/v1/requests/stream")
	var last string
	said := replicasOfEvent(t, s.next(&last, "replicas"))
	if len(said.Answered) != 3 || said.Answered[0] != a.id || len(said.Missing) != 0 {
		t.Fatalf("the stream follows %+v", said)
	}
	hit(b, "/hit/1")
	hit(c, "/hit/2")
	hit(a, "/hit/3")
	hit(b, "/hit/4")
	got := map[string]string{}
	for range 4 {
		e := entryOf(t, s.next(&last, "request"))
		got[e.Path] = e.Replica
	}
	if want := map[string]string{"/hit/1": b.id, "/hit/2": c.id, "/hit/3": a.id, "/hit/4": b.id}; !maps.Equal(got, want) {
		t.Fatalf("the stream relayed %v, want %v", got, want)
	}
	for _, id := range []string{a.id, b.id, c.id} {
		if !strings.Contains(last, id+":") || !strings.Contains(last, ",@") {
			t.Fatalf("the last event's id %q is not the fleet's cursor", last)
		}
	}

	// Gone for a while, then back through another replica: what each
	// replica served meanwhile, once, and nothing sent before, the
	// request that began before the last event sent and ended after it
	// included.
	var slowDone sync.WaitGroup
	for _, r := range []replica{b, c} {
		slowDone.Go(func() { hit(r, "/slow/"+r.id) })
		<-arrived
	}
	hit(a, "/hit/4a")
	if e := entryOf(t, s.next(&last, "request")); e.Path != "/hit/4a" {
		t.Fatalf("the stream sent %s", e.Path)
	}
	s.close()
	close(release)
	slowDone.Wait()
	hit(a, "/hit/5")
	hit(b, "/hit/6")
	hit(c, "/hit/7")
	s = openSSE(t, b.admin+"/api/v1/requests/stream", "Last-Event-ID", last)
	replicasOfEvent(t, s.next(&last, "replicas"))
	got = map[string]string{}
	for range 5 {
		e := entryOf(t, s.next(&last, "request"))
		got[e.Path] = e.Replica
	}
	if want := map[string]string{"/slow/" + b.id: b.id, "/slow/" + c.id: c.id, "/hit/5": a.id, "/hit/6": b.id, "/hit/7": c.id}; !maps.Equal(got, want) {
		t.Fatalf("resumed, the stream sent %v, want %v", got, want)
	}
	hit(c, "/hit/8")
	if e := entryOf(t, s.next(&last, "request")); e.Path != "/hit/8" {
		t.Fatalf("after the resumption, the stream sent %s again", e.Path)
	}

	// A replica that joins is followed, from its first entry.
	d := start()
	hit(d, "/hit/9")
	if e := entryOf(t, s.next(&last, "request")); e.Path != "/hit/9" || e.Replica != d.id {
		t.Fatalf("the replica that joined: %+v", e)
	}
	if r := replicasOfEvent(t, s.next(&last, "replicas")); len(r.Answered) != 4 {
		// The entry can come before the replicas event that counts d: it
		// is read first, then said.
		t.Fatalf("with a replica joined, the stream follows %+v", r)
	}

	// Killed: missing, and the others still relayed.
	killReplica(t, url, c.p, c.id)
	for {
		r := replicasOfEvent(t, s.next(&last, "replicas"))
		if len(r.Missing) == 1 && r.Missing[0].ID == c.id && !slices.Contains(r.Answered, c.id) {
			break
		}
	}
	hit(d, "/hit/10")
	if e := entryOf(t, s.next(&last, "request")); e.Path != "/hit/10" {
		t.Fatalf("with a replica killed, the stream sent %s", e.Path)
	}

	// since and limit: the newest of the merge first, then what comes.
	hit(b, "/hit/10b")
	if e := entryOf(t, s.next(&last, "request")); e.Path != "/hit/10b" {
		t.Fatalf("the stream sent %s", e.Path)
	}
	r := openSSE(t, d.admin+"/api/v1/requests/stream?limit=2")
	replicasOfEvent(t, r.next(nil, "replicas"))
	first, second := entryOf(t, r.next(nil, "request")), entryOf(t, r.next(nil, "request"))
	if first.Path != "/hit/10" || first.Replica != d.id || second.Path != "/hit/10b" || second.Replica != b.id {
		t.Fatalf("limit=2 replayed %+v and %+v", first, second)
	}
	hit(a, "/hit/11")
	if e := entryOf(t, r.next(nil, "request")); e.Path != "/hit/11" {
		t.Fatalf("after its replay, the stream sent %s", e.Path)
	}
	r.close()

	// A row someone else wrote, answering what is not a signed stream:
	// missing from the start, the others followed.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-doppel-fleet-frames")
		_, _ = io.WriteString(w, "4 "+strings.Repeat("0", 64)+"\nevil")
	}))
	defer evil.Close()
	pgtest.Exec(t, url, `INSERT INTO doppel_replicas (id, config, url, host, pid, version, revision, started_at)
		VALUES ('forgedforgedforgedfor1', 'default', $1, 'evil', 1, '0', '0', now())`, evil.URL)
	r = openSSE(t, a.admin+"/api/v1/requests/stream")
	said = replicasOfEvent(t, r.next(nil, "replicas"))
	forged := slices.IndexFunc(said.Missing, func(m struct{ ID, State, Error string }) bool { return m.ID == "forgedforgedforgedfor1" })
	if len(said.Answered) != 3 || forged < 0 || !strings.Contains(said.Missing[forged].Error, "not signed with the fleet key") {
		t.Fatalf("with a forged row: %+v", said)
	}
	r.close()
	pgtest.Exec(t, url, `DELETE FROM doppel_replicas WHERE id = 'forgedforgedforgedfor1'`)

	// The Go client: every replica's entries, and which replicas.
	api := sdk.New(a.admin)
	cs, err := api.StreamRequests(context.Background(), sdk.Filter{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	hit(d, "/hit/sdk")
	for {
		e, err := cs.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e.Path == "/hit/sdk" {
			if e.Replica != d.id || len(cs.Replicas().Answered) != 3 || cs.Replicas().Answered[0] != a.id {
				t.Fatalf("through the Go client: %s of %s, the stream follows %+v", e.Path, e.Replica, cs.Replicas())
			}
			break
		}
	}
	if l, err := api.Requests(context.Background(), sdk.Filter{Local: true}); err != nil || len(l.Replicas.Answered) != 1 || slices.ContainsFunc(l.Requests, func(r sdk.Request) bool { return r.Replica != a.id }) {
		t.Fatalf("a local list through the Go client: %+v %v", l.Replicas, err)
	}

	// The command line: a replica column.
	tail := startProc(t, invocation{args: []string{"requests", "tail", "--admin", a.admin}})
	tail.waitLine("the header", 15*time.Second, func(l string) bool { return strings.HasSuffix(strings.TrimSpace(l), "REPLICA") })
	hit(b, "/hit/12")
	tail.waitLine("the entry", 15*time.Second, func(l string) bool {
		return strings.Contains(l, "/hit/12") && strings.HasSuffix(strings.TrimSpace(l), b.id)
	})
	tail.waitLine("the replica missing", 15*time.Second, func(l string) bool {
		return strings.Contains(l, fmt.Sprintf("(replica %s at ", c.id))
	})
}
