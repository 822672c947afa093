package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/doppelproxy/doppel/internal/shared"
	"github.com/jackc/pgx/v5"
)

// SessionChannel is the NOTIFY channel of a configuration's sessions.
func SessionChannel(name string) string { return channelName("doppel_sessions_", name) }

// Sessions keeps a configuration's sessions in the sessions table, for
// every replica (shared.Sessions).
type Sessions struct{ s *Store }

var _ shared.Sessions = Sessions{}

// Sessions are the store's sessions.
func (s *Store) Sessions() Sessions { return Sessions{s} }

// Create inserts a session: refused when its id is live or MaxLive are.
func (ss Sessions) Create(ctx context.Context, st shared.Session) error {
	return ss.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE config = $1 AND expires_at <= now()`, ss.s.name); err != nil {
			return err
		}
		var live int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE config = $1`, ss.s.name).Scan(&live); err != nil {
			return err
		}
		if live >= shared.MaxLiveSessions {
			return shared.ErrSessionsFull
		}
		tag, err := tx.Exec(ctx, `INSERT INTO sessions (config, id, revision, expires_at, body) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (config, id) DO NOTHING`, ss.s.name, st.ID, st.Revision, st.ExpiresAt, st.Body)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return shared.ErrSessionExists
		}
		return nil
	})
}

// Replace writes over a live session whose revision is still revision.
func (ss Sessions) Replace(ctx context.Context, revision string, st shared.Session) error {
	return ss.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE sessions SET revision = $4, expires_at = $5, body = $6
			WHERE config = $1 AND id = $2 AND revision = $3 AND expires_at > now()`,
			ss.s.name, st.ID, revision, st.Revision, st.ExpiresAt, st.Body)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE config = $1 AND id = $2 AND expires_at > now()`, ss.s.name, st.ID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return shared.ErrNoSession
		}
		return shared.ErrSessionRevision
	})
}

// Delete ends a live session.
func (ss Sessions) Delete(ctx context.Context, id string) error {
	return ss.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM sessions WHERE config = $1 AND id = $2 AND expires_at > now()`, ss.s.name, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return shared.ErrNoSession
		}
		return nil
	})
}

// Load reads the live sessions.
func (ss Sessions) Load(ctx context.Context) ([]shared.Session, error) {
	rows, err := ss.s.pool.Query(ctx, `SELECT id, revision, expires_at, body FROM sessions WHERE config = $1 AND expires_at > now()`, ss.s.name)
	if err != nil {
		return nil, ss.fail(err)
	}
	defer rows.Close()
	var out []shared.Session
	for rows.Next() {
		var st shared.Session
		if err := rows.Scan(&st.ID, &st.Revision, &st.ExpiresAt, &st.Body); err != nil {
			return nil, ss.fail(err)
		}
		out = append(out, st)
	}
	return out, ss.fail(rows.Err())
}

// Watch calls changed after every session write of any replica, and once
// after each connect to catch up, until ctx ends.
func (ss Sessions) Watch(ctx context.Context, log *slog.Logger, changed func() bool) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		listen(ctx, ss.s.url, SessionChannel(ss.s.name), "session changes", log, func(string) bool { return changed() })
	}()
	return stopped
}

// write runs fn in a transaction and notifies the other replicas when it
// commits.
func (ss Sessions) write(ctx context.Context, fn func(pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tx, err := ss.s.pool.Begin(ctx)
	if err != nil {
		return ss.fail(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	// One writer of a configuration's sessions at a time, fleet-wide: the
	// count and the insert of Create are then one step.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, SessionChannel(ss.s.name)); err != nil {
		return ss.fail(err)
	}
	if err := fn(tx); err != nil {
		if errors.Is(err, shared.ErrSessionsFull) || errors.Is(err, shared.ErrSessionExists) || errors.Is(err, shared.ErrNoSession) || errors.Is(err, shared.ErrSessionRevision) {
			return err
		}
		return ss.fail(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, SessionChannel(ss.s.name)); err != nil {
		return ss.fail(err)
	}
	return ss.fail(tx.Commit(ctx))
}

func (ss Sessions) fail(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("the database: %s", maskIn(err, ss.s.url))
}
