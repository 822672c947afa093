package postgres

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/fleet"
	"github.com/doppelproxy/doppel/internal/store/pgtest"
)

// TestTheRegistry: a replica's row is live while its heartbeat is fresh,
// lost 10 s after it stops (by the database's clock), forgotten after 5
// minutes, written again when it was deleted behind its back, and gone
// when it leaves; another configuration's replicas are not listed.
func TestTheRegistry(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	p := pool(t, url)
	if _, err := Migrate(ctx, p); err != nil {
		t.Fatal(err)
	}
	open := func(name string) *Store {
		s, err := Open(ctx, url, name, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, other := open("default"), open("other")
	first, err := fleet.Join(ctx, a.Replicas(), fleet.This("http://10.0.0.1:8081", "0000000000000001"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// second writes its row once and no heartbeat follows, so that the
	// test alone ages it.
	second := fleet.This("http://10.0.0.2:8081", "0000000000000001")
	if err := a.Replicas().Beat(ctx, second); err != nil {
		t.Fatal(err)
	}
	third, err := fleet.Join(ctx, other.Replicas(), fleet.This("http://10.0.0.3:8081", "0000000000000002"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer third.Stop(ctx)
	list := func() []fleet.Replica {
		t.Helper()
		rs, err := first.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	rs := list()
	if len(rs) != 2 || rs[0].ID != first.Self().ID || !rs[0].Self || rs[1].Self || rs[0].State != fleet.Live || rs[1].State != fleet.Live ||
		rs[1].URL != "http://10.0.0.2:8081" || rs[0].PID == 0 || rs[0].Host == "" || rs[0].Version == "" || len(rs[0].ID) != 22 {
		t.Fatalf("two live replicas, oldest first: %+v", rs)
	}

	// second stops beating: lost after 10 s, then forgotten after 5 minutes.
	exec(t, p, `UPDATE doppel_replicas SET seen_at = now() - interval '11 seconds' WHERE id = $1`, second.ID)
	if rs = list(); len(rs) != 2 || rs[0].State != fleet.Live || rs[1].ID != second.ID || rs[1].State != fleet.Lost {
		t.Fatalf("lost after 10 s, listed after the live: %+v", rs)
	}
	exec(t, p, `UPDATE doppel_replicas SET seen_at = now() - interval '301 seconds' WHERE id = $1`, second.ID)
	if rs = list(); len(rs) != 1 {
		t.Fatalf("a replica lost 5 minutes ago is still listed: %+v", rs)
	}

	// A row deleted behind its back is written again by the next heartbeat.
	exec(t, p, `DELETE FROM doppel_replicas WHERE id = $1`, first.Self().ID)
	first.SetRevision("00000000000000ff")
	deadline := time.Now().Add(2*fleet.HeartbeatEvery + time.Second)
	for {
		if rs = list(); len(rs) >= 1 && rs[0].ID == first.Self().ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the row was not written again within two heartbeats: %+v", rs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rs[0].Revision != "00000000000000ff" {
		t.Fatalf("the heartbeat did not carry the revision in force: %+v", rs[0])
	}

	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Replicas().Leave(ctx, second.ID); err != nil {
		t.Fatal(err)
	}
	if rs, _ := other.Replicas().List(ctx); len(rs) != 1 || rs[0].URL != "http://10.0.0.3:8081" {
		t.Fatalf("the other configuration's replicas: %+v", rs)
	}
	if rs, _ := a.Replicas().List(ctx); len(rs) != 0 {
		t.Fatalf("rows left after both left: %+v", rs)
	}
}
