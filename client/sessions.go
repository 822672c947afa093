package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Session is an overlay of mocks and faults in force only for requests
// carrying its id in X-Doppel-Session (server.session_header): parallel
// tests share one Doppel, each with faults of its own.
type Session struct {
	// ID is chosen by Doppel (22 URL-safe characters) when empty; only
	// on create.
	ID string `json:"id,omitempty"`
	// TTL is the seconds until it ends by itself, 1 to 86400 (default
	// 600), counted again from each update.
	TTL int `json:"ttl,omitempty"`
	// Revision is the one an update is based on; UpdateSession sets it.
	Revision string `json:"revision,omitempty"`
	// Proxies: proxy name -> what the session lays over it.
	Proxies map[string]SessionProxy `json:"proxies"`
}

// SessionProxy is what a session lays over one proxy: its mocks are
// tried before the proxy's, and each fault it declares replaces the
// proxy's for the session's requests.
type SessionProxy struct {
	Mocks     []Mock     `json:"mocks,omitempty"`
	Replace   *float64   `json:"replace,omitempty"`
	Loss      *Loss      `json:"loss,omitempty"`
	Latency   *Latency   `json:"latency,omitempty"`
	Abort     *Abort     `json:"abort,omitempty"`
	Hang      *Hang      `json:"hang,omitempty"`
	Bandwidth *Bandwidth `json:"bandwidth,omitempty"`
}

// SessionInfo is a live session.
type SessionInfo struct {
	ID        string    `json:"id"`
	ExpiresAt time.Time `json:"expires_at"`
	Revision  string    `json:"revision"`
	TTL       int       `json:"ttl"`
	// Proxies are the proxies it lays over.
	Proxies []string `json:"proxies"`
}

// SessionDetail is a live session with what it lays over each proxy, as
// written.
type SessionDetail struct {
	ID        string                  `json:"id"`
	ExpiresAt time.Time               `json:"expires_at"`
	Revision  string                  `json:"revision"`
	TTL       int                     `json:"ttl"`
	Proxies   map[string]SessionProxy `json:"proxies"`
}

// CreateSession starts a session; it is in force when this returns. The
// caller needs update on every proxy it names.
func (c *Client) CreateSession(ctx context.Context, s Session) (SessionInfo, error) {
	var out SessionInfo
	_, err := c.do(ctx, call{op: opCreateSession, in: s, want: []int{http.StatusCreated}, out: &out})
	return out, err
}

// CreateSessionJSON is CreateSession of a session written as JSON, such
// as one read from a file: it is sent as written, so that Doppel judges
// it whole (a field this client does not know, a typo).
func (c *Client) CreateSessionJSON(ctx context.Context, session []byte) (SessionInfo, error) {
	var out SessionInfo
	_, err := c.do(ctx, call{op: opCreateSession, in: json.RawMessage(session), want: []int{http.StatusCreated}, out: &out})
	return out, err
}

// Sessions lists the live sessions whose every proxy the caller may read.
func (c *Client) Sessions(ctx context.Context) ([]SessionInfo, error) {
	var out struct {
		Sessions []SessionInfo `json:"sessions"`
	}
	_, err := c.do(ctx, call{op: opListSessions, want: []int{http.StatusOK}, out: &out})
	return out.Sessions, err
}

// Session reads a live session; an unknown or ended one is ErrNotFound.
func (c *Client) Session(ctx context.Context, id string) (SessionDetail, error) {
	var out SessionDetail
	_, err := c.do(ctx, call{op: opReadSession, params: []string{id}, want: []int{http.StatusOK}, out: &out})
	return out, err
}

// UpdateSession replaces a session's overlay if its revision is still
// revision (compare-and-swap; stale is ErrRevisionMismatch).
func (c *Client) UpdateSession(ctx context.Context, id string, s Session, revision string) (SessionInfo, error) {
	s.Revision = revision
	var out SessionInfo
	_, err := c.do(ctx, call{op: opUpdateSession, params: []string{id}, in: s, want: []int{http.StatusOK}, out: &out})
	return out, err
}

// DeleteSession ends a session at once.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{op: opDeleteSession, params: []string{id}, want: []int{http.StatusNoContent}})
	return err
}
