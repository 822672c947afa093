// Package fleet is what the replicas serving one configuration from
// PostgreSQL know of each other (SPEC §18.1): a registry each one writes
// its row to at start, refreshes every HeartbeatEvery and deletes on a clean
// shutdown. A single instance (the file store) is a fleet of one.
package fleet

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppelproxy/doppel/internal/shared"
	"github.com/doppelproxy/doppel/internal/version"
)

const (
	// HeartbeatEvery is how often a replica refreshes its row.
	HeartbeatEvery = 2 * time.Second
	// LostAfter is how old a heartbeat makes a replica lost.
	LostAfter = shared.LostAfter
	// ForgetAfter is how long a lost replica is still reported.
	ForgetAfter = shared.ForgetAfter
	// MaxReplicas bounds what a list reads: a registry table someone else
	// filled costs no more than this.
	MaxReplicas = shared.MaxReplicas
	// beatTimeout bounds one heartbeat, so a database that hangs is an
	// outage rather than a goroutine stuck.
	beatTimeout = HeartbeatEvery
)

// States of a replica.
const (
	Live = "live"
	Lost = "lost"
)

// Replica is one row of the registry.
type Replica = shared.Replica

// Registry is where the replicas of one configuration write their rows.
// The contract sits in package shared so that a store implements it
// without importing this package.
type Registry = shared.Replicas

// NewID is a replica id: 22 URL-safe characters, new on every start,
// never with a leading `-`, which a command line would take for a flag.
func NewID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// Advertise is the admin URL a replica is reached at by its peers: given,
// or http:// and the admin listener's address, a wildcard host replaced by
// the host's first address that is not a loopback one.
func Advertise(given string, admin net.Addr) string {
	if given != "" || admin == nil {
		return given
	}
	host, port, err := net.SplitHostPort(admin.String())
	if err != nil {
		return "http://" + admin.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = firstAddress(ip.To4() == nil)
	}
	return (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}).String()
}

// firstAddress is the host's first unicast address that is not a loopback
// one, IPv4 first unless v6; loopback when it has none.
func firstAddress(v6 bool) string {
	addrs, _ := net.InterfaceAddrs()
	var fallback string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() {
			continue
		}
		if (n.IP.To4() == nil) == v6 {
			return n.IP.String()
		}
		if fallback == "" {
			fallback = n.IP.String()
		}
	}
	if fallback != "" {
		return fallback
	}
	if v6 {
		return "::1"
	}
	return "127.0.0.1"
}

// CheckAdvertise refuses an advertised URL peers could not call.
func CheckAdvertise(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return &advertiseError{s}
	}
	return nil
}

type advertiseError struct{ url string }

func (e *advertiseError) Error() string {
	return strconv.Quote(e.url) + " is not an admin URL peers can call: an http or https URL with a host and nothing after it, such as http://10.0.0.5:8081"
}

// Member is this replica in its fleet: its row, kept fresh until Stop.
type Member struct {
	reg  Registry
	log  *slog.Logger
	mu   sync.Mutex
	self Replica // Revision follows the configuration in force

	stop    context.CancelFunc
	stopped chan struct{}
	counts  atomic.Pointer[counts]
}

// Join writes self's row, failing when the registry cannot be written,
// then keeps it fresh every HeartbeatEvery until Stop. A heartbeat that
// fails is said once per outage; the row is written again when the
// registry answers.
func Join(ctx context.Context, reg Registry, self Replica, log *slog.Logger) (*Member, error) {
	self.Self, self.State = true, Live
	m := &Member{reg: reg, log: log, self: self, stopped: make(chan struct{})}
	if err := m.beat(ctx); err != nil {
		return nil, err
	}
	m.count(ctx)
	var run context.Context
	run, m.stop = context.WithCancel(context.Background())
	go m.run(run)
	return m, nil
}

// Counts are how many replicas are live and lost, as the last heartbeat
// found them: what a status answers without asking the database.
func (m *Member) Counts() (live, lost int, err error) {
	if m.reg == nil {
		return 1, 0, nil
	}
	c := m.counts.Load()
	if c == nil {
		return 0, 0, errors.New("the registry has not been read yet")
	}
	return c.live, c.lost, c.err
}

type counts struct {
	live, lost int
	err        error
}

// count reads the registry after a heartbeat, for Counts.
func (m *Member) count(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, beatTimeout)
	defer cancel()
	rs, err := m.reg.List(ctx)
	live, lost := Count(rs)
	m.counts.Store(&counts{live, lost, err})
}

// Self is this replica's row as it last wrote it.
func (m *Member) Self() Replica {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.self
}

// Shared reports whether m has a registry of peers (the database), not
// an instance of its own.
func (m *Member) Shared() bool { return m.reg != nil }

// SetRevision is the revision of the configuration now in force, written
// with the next heartbeat.
func (m *Member) SetRevision(rev string) {
	m.mu.Lock()
	m.self.Revision = rev
	m.mu.Unlock()
}

// List is the fleet, this replica marked.
func (m *Member) List(ctx context.Context) ([]Replica, error) {
	if m.reg == nil {
		r := m.Self()
		r.SeenAt = time.Now().UTC()
		return []Replica{r}, nil
	}
	rs, err := m.reg.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := range rs {
		rs[i].Self = rs[i].ID == m.self.ID
	}
	return rs, nil
}

func (m *Member) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, beatTimeout)
	defer cancel()
	return m.reg.Beat(ctx, m.Self())
}

func (m *Member) run(ctx context.Context) {
	defer close(m.stopped)
	t := time.NewTicker(HeartbeatEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Not cut by Stop: a heartbeat cut on the wire may still commit
		// after the row is deleted, and bring it back.
		err := m.beat(context.Background())
		if err == nil {
			m.count(ctx)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			m.log.Warn("cannot write this replica's heartbeat to the registry; the other replicas will see it as lost until it is back", "replica", m.self.ID, "error", err)
		case err == nil && failing:
			failing = false
			m.log.Info("this replica's heartbeat is written again", "replica", m.self.ID)
		}
	}
}

// Stop ends the heartbeat and deletes this replica's row, within ctx.
func (m *Member) Stop(ctx context.Context) error {
	if m.reg == nil {
		return nil
	}
	m.stop()
	<-m.stopped
	return m.reg.Leave(ctx, m.self.ID)
}

// This is a row for this process: a new id, its host, pid and version,
// started now.
func This(url, revision string) Replica {
	host, _ := os.Hostname()
	return Replica{ID: NewID(), URL: url, Host: host, PID: os.Getpid(), Version: version.Version, Revision: revision, StartedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

// Single is an instance that is its own fleet (the file store): List is
// itself, and there is no row to keep.
func Single(self Replica) *Member {
	self.Self, self.State = true, Live
	return &Member{self: self}
}

// Count is how many replicas are live and lost.
func Count(rs []Replica) (live, lost int) {
	for _, r := range rs {
		if r.State == Live {
			live++
		} else {
			lost++
		}
	}
	return live, lost
}
