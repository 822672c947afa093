package postgres

import (
	"context"
	"log/slog"
	"time"

	"github.com/doppelproxy/doppel/internal/store"
	"github.com/jackc/pgx/v5"
)

// Watch follows this configuration's writes by any replica (Listen) in
// the background until ctx ends. The database may be unreachable when it
// starts: Listen keeps trying, so there is no error to return.
func (s *Store) Watch(ctx context.Context, log *slog.Logger, changed func(revision string) bool) (<-chan struct{}, error) {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		Listen(ctx, s.url, s.name, log, changed)
	}()
	return stopped, nil
}

// Describe names what Watch follows.
func (s *Store) Describe() string { return "the database" }

// Listen keeps a connection LISTENing on the configuration's channel and
// calls changed with the revision a write announced, debounced: a burst
// of writes is one call. When the database goes away it keeps trying to
// reconnect (the running configuration keeps serving meanwhile), and after
// every connect it calls changed("") once to catch up with what it missed:
// after a reconnect, and after the first too, since the database may have
// been written (or gone away) between the load at startup and the LISTEN.
// changed reports whether it is done; when it is not (the load failed for
// a reason that may pass, such as a pooled connection the restart killed)
// it is called again, backing off, until it is or another write comes.
// It returns when ctx ends.
func Listen(ctx context.Context, url, name string, log *slog.Logger, changed func(revision string) (done bool)) {
	listen(ctx, url, Channel(name), "configuration changes", log, changed)
}

// listen is Listen on any channel; what names what it carries, for the
// log lines.
func listen(ctx context.Context, url, channel, what string, log *slog.Logger, changed func(payload string) (done bool)) {
	backoff := 250 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
		}
		if err != nil {
			if conn != nil {
				conn.Close(context.Background())
			}
			if ctx.Err() != nil {
				return
			}
			log.Warn("cannot listen for "+what+"; retrying", "database", store.MaskURL(url), "error", maskIn(err, url))
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 250 * time.Millisecond
		if !first {
			log.Info("listening for " + what + " again; catching up")
		}
		err = wait(ctx, conn, changed)
		first = false
		conn.Close(context.Background())
		if ctx.Err() == nil {
			log.Warn("lost the connection that listens for "+what+"; reconnecting", "error", maskIn(err, url))
		}
	}
}

// debounce is how long a burst of notifications is gathered into one.
const debounce = 100 * time.Millisecond

// retryFirst is how long a failed call of changed waits before it is
// made again; each failure doubles it, up to retryMost.
const (
	retryFirst = 250 * time.Millisecond
	retryMost  = 5 * time.Second
)

func wait(ctx context.Context, conn *pgx.Conn, changed func(string) bool) error {
	notes := make(chan string, 64)
	failed := make(chan error, 1)
	go func() {
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				failed <- err
				return
			}
			notes <- n.Payload
		}
	}()
	var fire, retry <-chan time.Time
	last, pause := "", retryFirst
	call := func() {
		if changed(last) {
			retry, pause = nil, retryFirst
			return
		}
		retry = time.After(pause)
		pause = min(pause*2, retryMost)
	}
	call()
	for {
		select {
		case p := <-notes:
			last = p
			if fire == nil {
				fire = time.After(debounce)
			}
		case <-fire:
			fire = nil
			retry, pause = nil, retryFirst
			call()
		case <-retry:
			retry = nil
			call()
		case err := <-failed:
			return err
		}
	}
}
