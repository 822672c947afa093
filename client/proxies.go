package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"time"
)

// ProxyRevision is a proxy with the revision an update must carry.
type ProxyRevision struct {
	Revision string `json:"revision"`
	Proxy    Proxy  `json:"proxy"`
}

// Proxies lists the proxies in force that the caller may read, in the
// order they are tried, each with its revision.
func (c *Client) Proxies(ctx context.Context) ([]ProxyRevision, error) {
	var out struct {
		Proxies []ProxyRevision `json:"proxies"`
	}
	_, err := c.do(ctx, call{op: opListProxies, want: []int{http.StatusOK}, out: &out})
	return out.Proxies, err
}

// Proxy reads one proxy in canonical form (every default explicit) and
// its revision.
func (c *Client) Proxy(ctx context.Context, name string) (Proxy, string, error) {
	var out ProxyRevision
	_, err := c.do(ctx, call{op: opReadProxy, params: []string{name}, want: []int{http.StatusOK}, out: &out})
	return out.Proxy, out.Revision, err
}

// CreateProxy adds a proxy, in force when it returns, and returns its
// revision. A taken name is ErrConflict; a document breaking a rule
// ErrConfigInvalid, its message listing every violation.
func (c *Client) CreateProxy(ctx context.Context, p Proxy) (string, error) {
	var out ProxyRevision
	_, err := c.do(ctx, call{op: opCreateProxy, in: map[string]any{"proxy": withType(p)},
		want: []int{http.StatusCreated}, out: &out})
	return out.Revision, err
}

// UpdateProxy replaces the proxy named p.Name if its revision is still
// revision (compare-and-swap), and returns the new one. A stale revision
// is ErrRevisionMismatch: read it again, reapply the change, retry.
func (c *Client) UpdateProxy(ctx context.Context, p Proxy, revision string) (string, error) {
	return c.RenameProxy(ctx, p.Name, p, revision)
}

// RenameProxy replaces the proxy named from with p, whose name may
// differ: its template files move with it.
func (c *Client) RenameProxy(ctx context.Context, from string, p Proxy, revision string) (string, error) {
	if revision == "" {
		// Sent as it is, the answer would be 428 all the same; saying so
		// here names the argument.
		return "", &Error{Operation: opUpdateProxy.id, Status: http.StatusPreconditionRequired, Code: "REVISION_REQUIRED",
			Message: "an update carries the revision it is based on: pass the one Proxy returned"}
	}
	var out ProxyRevision
	_, err := c.do(ctx, call{op: opUpdateProxy, params: []string{from},
		in: map[string]any{"revision": revision, "proxy": withType(p)}, want: []int{http.StatusOK}, out: &out})
	return out.Revision, err
}

// DeleteProxy removes a proxy and its template files.
func (c *Client) DeleteProxy(ctx context.Context, name string) error {
	_, err := c.do(ctx, call{op: opDeleteProxy, params: []string{name}, want: []int{http.StatusNoContent}})
	return err
}

// withType says http when the proxy says nothing.
func withType(p Proxy) Proxy {
	if p.Type == "" {
		p.Type = "http"
	}
	return p
}

// TemplateFile is a template file a proxy's mocks name.
type TemplateFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"` // bytes
}

// Templates lists a proxy's template files.
func (c *Client) Templates(ctx context.Context, proxy string) ([]TemplateFile, error) {
	var out struct {
		Templates []TemplateFile `json:"templates"`
	}
	_, err := c.do(ctx, call{op: opListTemplates, params: []string{proxy}, want: []int{http.StatusOK}, out: &out})
	return out.Templates, err
}

// UploadTemplate stores a template file some mock of the proxy names in
// response.template (else ErrTemplateNotDeclared). The next request uses
// it.
func (c *Client) UploadTemplate(ctx context.Context, proxy, file string, content io.Reader) error {
	if content == nil {
		return &Error{Operation: opUploadTemplate.id, Code: "CONFIG_INVALID", Status: http.StatusBadRequest, Message: "no content to upload"}
	}
	_, err := c.do(ctx, call{op: opUploadTemplate, params: []string{proxy, file}, in: content, want: []int{http.StatusNoContent}})
	return err
}

// DeleteTemplate removes a template file.
func (c *Client) DeleteTemplate(ctx context.Context, proxy, file string) error {
	_, err := c.do(ctx, call{op: opDeleteTemplate, params: []string{proxy, file}, want: []int{http.StatusNoContent}})
	return err
}

// Counter is a count a fault's when condition keeps.
type Counter struct {
	Fault string `json:"fault"`
	// Mock is the mock whose own fault counts; empty for the proxy's.
	Mock string `json:"mock"`
	// Key is the per header's value or the client IP; empty when
	// proxy-wide.
	Key       string    `json:"key"`
	Count     int64     `json:"count"`
	FirstSeen time.Time `json:"first_seen"`
}

// Counters lists a proxy's fault counters; with a session id, those of
// that session's overlay of it.
func (c *Client) Counters(ctx context.Context, proxy, session string) ([]Counter, error) {
	var out struct {
		Counters []Counter `json:"counters"`
	}
	_, err := c.do(ctx, call{op: opListCounters, params: []string{proxy}, query: sessionQuery(session),
		want: []int{http.StatusOK}, out: &out})
	return out.Counters, err
}

// ResetCounters starts a proxy's counts again (a session's, with its id).
func (c *Client) ResetCounters(ctx context.Context, proxy, session string) error {
	_, err := c.do(ctx, call{op: opResetCounters, params: []string{proxy}, query: sessionQuery(session),
		want: []int{http.StatusNoContent}})
	return err
}

func sessionQuery(session string) url.Values {
	if session == "" {
		return nil
	}
	return url.Values{"session": {session}}
}

// Recording selects the journal's exchanges to record as mocks.
type Recording struct {
	// Match is a regular expression over the path (unanchored).
	Match string `json:"match,omitempty"`
	// Session keeps only that session's exchanges.
	Session string `json:"session,omitempty"`
	// Since keeps the exchanges after an entry's ID or an RFC 3339 time.
	Since string `json:"since,omitempty"`
	// Local records from the journal of the replica asked alone.
	Local bool `json:"local,omitempty"`
}

// RecordPreview is what a recording would add.
type RecordPreview struct {
	// Mocks are one per method and path, the latest answer winning.
	Mocks []Mock `json:"mocks"`
	// Exchanges is how many exchanges they were made from.
	Exchanges int `json:"exchanges"`
	// Message says why there are none, when there are none.
	Message string `json:"message,omitempty"`
	// Replicas says whose journals they were made from: with the
	// PostgreSQL store every live replica's.
	Replicas ReplicasAnswered `json:"replicas"`
}

// Record shows the mocks the journal's forwarded exchanges of a proxy
// would make, without changing anything.
func (c *Client) Record(ctx context.Context, proxy string, r Recording) (RecordPreview, error) {
	var out RecordPreview
	_, err := c.do(ctx, call{op: opRecordProxy, params: []string{proxy}, in: r, want: []int{http.StatusOK}, out: &out})
	return out, err
}

// RecordAndApply appends those mocks to the proxy through the same
// compare-and-swap as UpdateProxy, and returns the proxy and its new
// revision. Nothing to record leaves the proxy as it is and returns its
// revision unchanged.
func (c *Client) RecordAndApply(ctx context.Context, proxy, revision string, r Recording) (Proxy, string, error) {
	out, err := c.ApplyRecording(ctx, proxy, revision, r)
	if err != nil {
		return Proxy{}, "", err
	}
	if out.Revision == "" {
		// Nothing matched: the preview's shape, and no change.
		p, rev, err := c.Proxy(ctx, proxy)
		return p, rev, err
	}
	return out.Proxy, out.Revision, nil
}

// RecordApplied is an applied recording: the proxy as it is now with its
// revision, and what the recording found (its Mocks are the preview's,
// named as appended). With nothing to record, Revision is empty and the
// proxy unchanged.
type RecordApplied struct {
	ProxyRevision
	RecordPreview
}

// ApplyRecording is RecordAndApply with what the recording found: how
// many exchanges, the message, whose journals.
func (c *Client) ApplyRecording(ctx context.Context, proxy, revision string, r Recording) (RecordApplied, error) {
	body := struct {
		Recording
		Revision string `json:"revision,omitempty"`
		Apply    bool   `json:"apply"`
	}{r, revision, true}
	var out RecordApplied
	_, err := c.do(ctx, call{op: opRecordProxy, params: []string{proxy}, in: body, want: []int{http.StatusOK}, out: &out})
	return out, err
}
