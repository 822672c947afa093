package postgres

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/doppelproxy/doppel/internal/shared"
	"github.com/jackc/pgx/v5"
)

// Counters are the fleet's counters of one proxy at one revision, or of
// one session's overlay of it (SPEC §18.1): every replica counts in the
// same rows of doppel_counters.
type Counters struct {
	s                        *Store
	proxy, revision, session string
	// inserted counts the keys this replica added, so that every
	// pruneEvery of them the oldest past the bound are deleted.
	inserted atomic.Uint64
	max      uint64
}

var _ shared.Counters = (*Counters)(nil)

// pruneEvery is how many new keys a replica adds between two prunings of
// the keys past a proxy's bound.
const pruneEvery = 1000

// maxCounterKey is what a row keeps of a key to show, as a replica's own
// counters keep; the count is of the whole key, by its hash.
const maxCounterKey = 256

// Counters are the fleet's counters of proxy at revision, session's
// overlay of it when session is not "", keeping at most max keys.
func (s *Store) Counters(proxy, revision, session string, max uint64) *Counters {
	return &Counters{s: s, proxy: proxy, revision: revision, session: session, max: max}
}

// Count implements shared.Counters: one statement, which inserts the key's
// row or adds one to it, and returns the count and the first time.
func (c *Counters) Count(ctx context.Context, scope shared.Scope, key string) (uint64, time.Time, error) {
	sum := sha256.Sum256([]byte(key))
	pool, err := c.s.countPool()
	if err != nil {
		return 0, time.Time{}, err
	}
	var n, age int64
	var inserted bool
	// The key's age by the database's clock, so that a window opens and
	// closes alike on replicas whose clocks differ.
	err = pool.QueryRow(ctx, `INSERT INTO doppel_counters (config, proxy, revision, session, mock, fault, key_hash, key, n)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1)
		ON CONFLICT (config, proxy, revision, session, mock, fault, key_hash) DO UPDATE SET n = doppel_counters.n + 1
		RETURNING n, (extract(epoch FROM clock_timestamp() - first_seen) * 1000000)::bigint, xmax = 0`,
		c.s.name, c.proxy, c.revision, c.session, scope.Mock, scope.Fault, sum[:], shown(key)).Scan(&n, &age, &inserted)
	if err != nil {
		return 0, time.Time{}, err
	}
	if inserted && c.inserted.Add(1)%pruneEvery == 0 {
		kind := counted
		if scope == (shared.Scope{}) {
			kind = attempts
		}
		c.s.background.Go(func() { c.prune(kind) })
	}
	return uint64(n), time.Now().Add(-time.Duration(age) * time.Microsecond), nil
}

// What a row counts: a fault's condition, or the attempts a seed counts
// (no mock, no fault), each kept to a bound of its own.
const (
	counted  = "fault <> ''"
	attempts = "fault = ''"
)

// shown is what a row keeps of a key: its first bytes, valid UTF-8.
func shown(key string) string {
	if len(key) > maxCounterKey {
		key = key[:maxCounterKey]
	}
	return strings.ToValidUTF8(key, string(utf8.RuneError))
}

// prune deletes the oldest keys of a kind past its bound, off the request
// path: c.max of a fault's counters (as a replica's own keep), as many
// attempts as a replica keeps.
func (c *Counters) prune(kind string) {
	bound := c.max
	if kind == attempts {
		bound = shared.MaxAttemptIDs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = c.s.pool.Exec(ctx, `DELETE FROM doppel_counters WHERE ctid IN (
		SELECT ctid FROM doppel_counters WHERE config = $1 AND proxy = $2 AND revision = $3 AND session = $4 AND `+kind+`
		ORDER BY first_seen DESC OFFSET $5)`, c.s.name, c.proxy, c.revision, c.session, bound)
}

// List implements shared.Counters: the faults' counters, not the attempts a
// seed counts (kept under no fault).
func (c *Counters) List(ctx context.Context, max uint64) ([]shared.Count, error) {
	rows, err := c.s.pool.Query(ctx, `SELECT mock, fault, key, n, first_seen FROM (
			SELECT mock, fault, key, n, first_seen FROM doppel_counters
			WHERE config = $1 AND proxy = $2 AND revision = $3 AND session = $4 AND fault <> ''
			ORDER BY first_seen DESC LIMIT $5) newest
		ORDER BY first_seen, mock, fault, key`, c.s.name, c.proxy, c.revision, c.session, min(max, c.max))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (shared.Count, error) {
		var k shared.Count
		var n int64
		err := row.Scan(&k.Mock, &k.Fault, &k.Key, &n, &k.FirstSeen)
		k.N = uint64(n)
		return k, err
	})
}

// Reset implements shared.Counters.
func (c *Counters) Reset(ctx context.Context) error {
	_, err := c.s.pool.Exec(ctx, `DELETE FROM doppel_counters WHERE config = $1 AND proxy = $2 AND revision = $3 AND session = $4`,
		c.s.name, c.proxy, c.revision, c.session)
	return err
}

// KeepCounters deletes the counters of the proxies this configuration no
// longer serves at those revisions (serving: proxy -> revision), and those
// of sessions no longer live: the replica that loads a new configuration
// calls it.
func (s *Store) KeepCounters(ctx context.Context, serving map[string]string) error {
	proxies, revisions := make([]string, 0, len(serving)), make([]string, 0, len(serving))
	for p, r := range serving {
		proxies, revisions = append(proxies, p), append(revisions, r)
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM doppel_counters c WHERE c.config = $1 AND (
		c.session = '' AND (c.proxy, c.revision) NOT IN (SELECT * FROM unnest($2::text[], $3::text[]))
		OR c.session <> '' AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.config = c.config AND s.id = c.session AND s.expires_at > now()))`,
		s.name, proxies, revisions)
	return err
}
