package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/store"
	"github.com/doppelproxy/doppel/internal/store/pgtest"
	"github.com/doppelproxy/doppel/internal/store/storetest"
	"github.com/jackc/pgx/v5"
)

// open is a migrated database holding src as configuration "default".
func open(t *testing.T, src []byte) store.Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(t), "default", filepath.Join(t.TempDir(), "templates"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := Migrate(ctx, s.Pool()); err != nil {
		t.Fatal(err)
	}
	doc, err := config.Parse(src) // rows may hold what the rules refuse
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, doc); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, open) }
func TestConcurrency(t *testing.T) { storetest.Contention(t, open) }

// TestLoadsAreOneSnapshot: 600 loads against a writer flipping between two
// documents never see proxies of one and settings of the other.
func TestLoadsAreOneSnapshot(t *testing.T) {
	ctx := context.Background()
	var b strings.Builder
	b.WriteString(storetest.Initial)
	for i := range 8 {
		fmt.Fprintf(&b, "  - {name: extra%d, type: http, url: 'http://h', resolve: {type: header, header: X-E}}\n", i)
	}
	s := open(t, []byte(b.String())).(*Store)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			snap, err := s.Load(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			doc := snap.Document
			level, timeout := config.LogLevel("error"), config.Timeout(10)
			if n%2 == 1 {
				level, timeout = "debug", 20
			}
			doc.Logging.Level = level
			for i := range doc.Proxies {
				doc.Proxies[i].Timeout = timeout
			}
			if _, err := s.Save(ctx, doc, snap.Revision); err != nil && !errors.Is(err, store.ErrRevisionMismatch) {
				t.Error(err)
				return
			}
		}
	}()
	for range 600 {
		snap, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The initial document (info, the default timeout) is left alone.
		want := map[config.LogLevel]config.Timeout{"error": 10, "debug": 20}[snap.Document.Logging.Level]
		for _, p := range snap.Document.Proxies {
			if want != 0 && p.Timeout != want {
				t.Fatalf("a load mixed two writes: logging %s with proxy %s at timeout %d", snap.Document.Logging.Level, p.Name, p.Timeout)
			}
		}
	}
	close(stop)
	wg.Wait()
}

func TestHandEditedRowIsReportedAgainstItsProxy(t *testing.T) {
	ctx := context.Background()
	s := open(t, []byte(storetest.Initial)).(*Store)
	if _, err := s.Pool().Exec(ctx, `UPDATE proxies SET document = jsonb_set(document, '{timeout}', '30000') WHERE name = 'alpha'`); err != nil {
		t.Fatal(err)
	}
	_, err := s.Load(ctx)
	var inv *config.Invalid
	if !errors.As(err, &inv) || inv.Violations[0].Path != "proxies[1].timeout" || !strings.Contains(inv.Violations[0].Message, "milliseconds") {
		t.Fatalf("got %v", err)
	}
}

func TestTemplatesAreMaterialized(t *testing.T) {
	ctx := context.Background()
	s := open(t, []byte(storetest.Initial)).(*Store)
	if err := s.WriteTemplate(ctx, "zeta", "answer.json.j2", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	dir := s.templates
	path := filepath.Join(dir, "zeta", "answer.json.j2")
	if b, _ := os.ReadFile(path); string(b) != "v1" {
		t.Fatal("the file was not written after the row")
	}
	os.RemoveAll(dir)
	if err := s.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "v1" {
		t.Fatal("materialize did not write the file back from the database")
	}
}

func TestURLPasswordIsMasked(t *testing.T) {
	_, err := Open(context.Background(), "postgres://doppel:hunter2@127.0.0.1:1/db?connect_timeout=1", "default", "")
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("%v", err)
	}
}

// A change whose load fails for a reason that may pass is tried again,
// backing off, until it is done: a replica whose catch-up met a pooled
// connection the database's restart had killed would otherwise miss the
// write for good.
func TestListenRetriesAFailedChange(t *testing.T) {
	url := pgtest.URL(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := make(chan string, 16)
	caughtUp := make(chan struct{})
	failures := 2
	go Listen(ctx, url, "retry", slog.New(slog.DiscardHandler), func(revision string) bool {
		if revision == "" {
			// The catch-up after connecting: the database may have been
			// written between a replica's load and its LISTEN.
			close(caughtUp)
			return true
		}
		calls <- revision
		if failures > 0 {
			failures--
			return false
		}
		return true
	})
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// Announce once, when the listener's LISTEN is in.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%retry%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the listener did not LISTEN")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-caughtUp:
	case <-time.After(5 * time.Second):
		t.Fatal("no catch-up after the first connect")
	}
	if _, err := conn.Exec(ctx, `SELECT pg_notify($1, 'r1')`, Channel("retry")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-calls:
		if r != "r1" {
			t.Fatalf("revision %q", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no call after a notification")
	}
	for i := range 2 {
		select {
		case r := <-calls:
			if r != "r1" {
				t.Fatalf("retry %d: revision %q", i+1, r)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the failed change was tried %d more time(s), not 2", i)
		}
	}
	select {
	case r := <-calls:
		t.Fatalf("called again (%q) after it was done", r)
	case <-time.After(time.Second):
	}
}

// TestChannelsFitPostgreSQLsNames: a long configuration name still makes
// channels PostgreSQL takes, distinct per name.
func TestChannelsFitPostgreSQLsNames(t *testing.T) {
	long := strings.Repeat("n", 80)
	for _, c := range []string{Channel(long), SessionChannel(long), SessionChannel(long + "x")} {
		if len(c) > maxIdentifier {
			t.Errorf("%s is %d bytes", c, len(c))
		}
	}
	if SessionChannel(long) == SessionChannel(long+"x") || Channel("default") != "doppel_config_default" {
		t.Error("channels are not one per name, or a short name's changed")
	}
}
