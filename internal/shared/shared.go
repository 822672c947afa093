// Package shared is what the replicas serving one configuration keep in
// common in its store (SPEC §18.1): the live sessions, the faults' counters
// and the registry of replicas. It holds only the contracts and their
// bounds, and imports nothing of Doppel's, so that a store implements them
// without reaching the packages that use them (session, fault and fleet,
// which reach the request path and the template engine).
package shared

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sessions is where sessions live when every replica of a configuration
// shares them (PostgreSQL): the session registry writes there first, and
// loads from there when a replica's write is announced.
type Sessions interface {
	Create(ctx context.Context, s Session) error
	Replace(ctx context.Context, revision string, s Session) error
	Delete(ctx context.Context, id string) error
	Load(ctx context.Context) ([]Session, error)
}

// Session is a session as Sessions keeps it: what its caller wrote.
type Session struct {
	ID        string
	Revision  string
	ExpiresAt time.Time
	Body      []byte // {"ttl", "proxies"}
}

// MaxLiveSessions bounds the sessions live at once (SPEC §18.4).
const MaxLiveSessions = 1000

// Errors a session write can meet, whoever keeps the sessions.
var (
	ErrNoSession       = errors.New("no such session")
	ErrSessionExists   = errors.New("a session of that id is live")
	ErrSessionsFull    = fmt.Errorf("%d sessions are live, the most there may be: end one, or let one expire", MaxLiveSessions)
	ErrSessionRevision = errors.New("the session changed since it was read")
)

// Counters are counters every replica of a fleet counts in (SPEC §18.1),
// for one proxy at one revision (and one session's overlay of it): each
// count is one atomic statement in the database.
type Counters interface {
	// Count counts one more request for key under scope, and returns how
	// many there are and when the first came.
	Count(ctx context.Context, scope Scope, key string) (n uint64, first time.Time, err error)
	// List is every counter, oldest first, at most max.
	List(ctx context.Context, max uint64) ([]Count, error)
	// Reset forgets every count.
	Reset(ctx context.Context) error
}

// Scope is the mock and fault a condition counts for.
type Scope struct {
	Mock, Fault string
}

// A Count is one counter as listed.
type Count struct {
	Mock, Fault, Key string
	N                uint64
	FirstSeen        time.Time
}

// MaxAttemptIDs is how many request ids a proxy remembers for counting
// attempts: an id is forgotten once this many newer ids have been seen for
// the first time since it was.
const MaxAttemptIDs = 100_000

// Replicas is where the replicas of one configuration write their rows.
type Replicas interface {
	// Beat writes r's row (inserting it again if it was forgotten), with
	// seen_at the database's now, and forgets the rows lost longer than
	// ForgetAfter.
	Beat(ctx context.Context, r Replica) error
	// Leave deletes the row of id.
	Leave(ctx context.Context, id string) error
	// List is every row of the configuration, live first, oldest start
	// first, State set by the database's clock.
	List(ctx context.Context) ([]Replica, error)
}

// Replica is one row of the registry.
type Replica struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	Revision  string    `json:"revision"`
	StartedAt time.Time `json:"started_at"`
	SeenAt    time.Time `json:"seen_at"`
	State     string    `json:"state"`
	Self      bool      `json:"self"`
}

const (
	// LostAfter is how old a heartbeat makes a replica lost.
	LostAfter = 10 * time.Second
	// ForgetAfter is how long a lost replica is still reported.
	ForgetAfter = 5 * time.Minute
	// MaxReplicas bounds what a list reads: a registry table someone else
	// filled costs no more than this.
	MaxReplicas = 1000
)
