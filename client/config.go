package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// ReloadResult is a reload that took effect.
type ReloadResult struct {
	// Revision is the whole configuration's.
	Revision string `json:"revision"`
	// Proxies is how many are in force, tcp proxies included.
	Proxies int `json:"proxies"`
	// TCPProxies is how many of them are tcp proxies.
	TCPProxies int `json:"tcp_proxies"`
	// Unapplied are sections that changed but take effect on a restart.
	Unapplied []string `json:"unapplied"`
}

// Reload loads the stored configuration and puts it in force; any
// failure leaves the running one as it was (ErrConfigInvalid with every
// violation, or ErrStoreError).
func (c *Client) Reload(ctx context.Context) (ReloadResult, error) {
	var out ReloadResult
	_, err := c.do(ctx, call{op: opReload, want: []int{http.StatusOK}, out: &out})
	return out, err
}

// Status is what a Doppel runs.
type Status struct {
	UptimeSeconds int64  `json:"uptime_seconds"`
	Revision      string `json:"revision"`
	// Seeded says whether fault rolls are reproducible (serve --seed).
	Seeded  bool          `json:"seeded"`
	Proxies []ProxyStatus `json:"proxies"`
	// Replica is the id of the replica that answered.
	Replica string `json:"replica"`
	// Fleet counts the replicas serving the configuration.
	Fleet FleetCount `json:"fleet"`
}

// FleetCount is how many replicas serve the configuration; Error says why
// the registry could not be read, and the counts are then zero.
type FleetCount struct {
	Live  int    `json:"live"`
	Lost  int    `json:"lost"`
	Error string `json:"error,omitempty"`
}

// Replica is one replica of the fleet (SPEC §18.1).
type Replica struct {
	ID string `json:"id"`
	// URL is the admin URL its peers reach it at.
	URL      string `json:"url"`
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	Version  string `json:"version"`
	Revision string `json:"revision"`
	// StartedAt and SeenAt (its last heartbeat) are RFC 3339 times.
	StartedAt string `json:"started_at"`
	SeenAt    string `json:"seen_at"`
	// State is "live", or "lost" after 10 s without a heartbeat.
	State string `json:"state"`
	// Self marks the replica that answered.
	Self bool `json:"self"`
}

// Replicas lists the replicas serving the configuration, live first,
// oldest start first; an instance with the file store lists itself.
func (c *Client) Replicas(ctx context.Context) ([]Replica, error) {
	var out struct {
		Replicas []Replica `json:"replicas"`
	}
	_, err := c.do(ctx, call{op: opListReplicas, want: []int{http.StatusOK}, out: &out})
	return out.Replicas, err
}

// ProxyStatus is one proxy in force.
type ProxyStatus struct {
	Name string `json:"name"`
	// Upstream is the URL without its credentials.
	Upstream string `json:"upstream"`
	// Resolve is "default" or "header:<Name>".
	Resolve string `json:"resolve"`
	Mocks   int    `json:"mocks"`
}

// Status reports what is in force; no token is needed.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var out Status
	_, err := c.do(ctx, call{op: opStatus, want: []int{http.StatusOK}, out: &out})
	return out, err
}

// Access is what the caller may do.
type Access struct {
	Caller Caller `json:"caller"`
	// Global: action (list, read, create, update, delete, upload) ->
	// whether the caller may, before per-proxy overrides.
	Global map[string]bool `json:"global"`
	// Proxies: proxy name -> action (read, update, delete, upload) ->
	// whether the caller may; nil when the caller may not list.
	Proxies map[string]map[string]bool `json:"proxies"`
}

// Caller is who Doppel takes the caller for: Kind anonymous, or token
// with its Name and Group.
type Caller struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Group string `json:"group"`
}

// Access reports what the caller may do; every caller may ask.
func (c *Client) Access(ctx context.Context) (Access, error) {
	var out Access
	_, err := c.do(ctx, call{op: opAccess, want: []int{http.StatusOK}, out: &out})
	return out, err
}

// Schema is the configuration document's JSON Schema (2020-12).
func (c *Client) Schema(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	if _, err := c.do(ctx, call{op: opSchema, want: []int{http.StatusOK}, out: &out}); err != nil {
		return nil, err
	}
	var head struct {
		Schema string `json:"$schema"`
	}
	if json.Unmarshal(out, &head) != nil || head.Schema == "" {
		return nil, fmt.Errorf("doppel %s: the answer is not a JSON Schema: %s", opSchema.id, snippet(out))
	}
	return out, nil
}
