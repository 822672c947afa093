package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// maxAnswer bounds an answer read into memory: a journal of 10,000
// entries with their bodies fits many times over.
const maxAnswer = 256 << 20

// Client calls one Doppel's admin API. It is safe for concurrent use.
// Every method takes a context and returns an error rather than
// panicking: for a bad base URL, a closed server, an answer that is not
// the API's, a cancelled context.
type Client struct {
	base   *url.URL
	bad    error // why the base URL is unusable; returned by every call
	http   *http.Client
	header string
	token  string
	answer func(Answer)
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as `Bearer <token>` on every call. Without one
// the caller is anonymous, which only public actions allow.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithTokenHeader names the header the token travels in; Authorization
// when not set, which Doppel accepts beside admin.auth.header.
func WithTokenHeader(name string) Option { return func(c *Client) { c.header = name } }

// Answer is an answer of the API as it came, before the client decoded
// it: its operation (as /openapi.json names it), HTTP status and body.
type Answer struct {
	Operation string
	Status    int
	Body      []byte
}

// WithAnswer calls f with every answer read whole, whatever its status,
// before it is decoded: for a program that prints the API's JSON as it
// came beside what it makes of the typed value. A stream's events are
// not answers read whole; its refusal is. Body is f's to keep.
func WithAnswer(f func(Answer)) Option { return func(c *Client) { c.answer = f } }

// WithHTTPClient sends the calls through hc instead of
// http.DefaultClient: for a timeout, a proxy, TLS settings.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// New returns a client of the admin API at adminURL, such as
// http://127.0.0.1:8081. An unusable URL is reported by every call.
func New(adminURL string, opts ...Option) *Client {
	c := &Client{http: http.DefaultClient, header: "Authorization"}
	for _, o := range opts {
		o(c)
	}
	u, err := url.Parse(strings.TrimRight(adminURL, "/"))
	switch {
	case err != nil:
		c.bad = fmt.Errorf("doppel: the admin URL %q: %w", adminURL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		c.bad = fmt.Errorf("doppel: the admin URL %q is not http or https", adminURL)
	case u.Host == "":
		c.bad = fmt.Errorf("doppel: the admin URL %q has no host", adminURL)
	case u.RawQuery != "" || u.Fragment != "":
		c.bad = fmt.Errorf("doppel: the admin URL %q may not have a query or a fragment", adminURL)
	}
	c.base = u
	return c
}

// call is one exchange with the API. in is sent as JSON (or as it is, an
// io.Reader); an answer with a status in want is decoded into out (nil:
// none is read). It returns the answer's headers.
type call struct {
	op      operation
	params  []string   // the path's {…} in order
	query   url.Values // nil: none
	in      any
	ifMatch string
	want    []int
	out     any
}

func (c *Client) do(ctx context.Context, k call) (http.Header, error) {
	resp, err := c.send(ctx, k)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := readBounded(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("doppel %s: reading the answer: %w", k.op.id, err)
	}
	c.answered(k.op, resp.StatusCode, body)
	if !wanted(resp.StatusCode, k.want) {
		return nil, answerError(k.op.id, resp.StatusCode, body)
	}
	if k.out != nil {
		if err := json.Unmarshal(body, k.out); err != nil {
			return nil, fmt.Errorf("doppel %s: the answer (%d, %s) is not what the API documents: %w",
				k.op.id, resp.StatusCode, snippet(body), err)
		}
	}
	return resp.Header, nil
}

// answered hands an answer read whole to WithAnswer's function.
func (c *Client) answered(op operation, status int, body []byte) {
	if c.answer != nil {
		c.answer(Answer{Operation: op.id, Status: status, Body: body})
	}
}

// send makes the request and returns the answer unread.
func (c *Client) send(ctx context.Context, k call) (*http.Response, error) {
	if c.bad != nil {
		return nil, c.bad
	}
	if ctx == nil {
		return nil, fmt.Errorf("doppel %s: a nil context", k.op.id)
	}
	target, err := k.op.url(c.base, k.params)
	if err != nil {
		return nil, fmt.Errorf("doppel %s: %w", k.op.id, err)
	}
	if k.query != nil {
		target.RawQuery = k.query.Encode()
	}
	var body io.Reader
	contentType := ""
	switch in := k.in.(type) {
	case nil:
	case json.RawMessage: // a document sent as written, for Doppel to judge
		body, contentType = bytes.NewReader(in), "application/json"
	case io.Reader:
		body, contentType = in, "application/octet-stream"
	default:
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("doppel %s: encoding the request: %w", k.op.id, err)
		}
		body, contentType = bytes.NewReader(b), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, k.op.method, target.String(), body)
	if err != nil {
		return nil, fmt.Errorf("doppel %s: %w", k.op.id, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set(c.header, "Bearer "+c.token)
	}
	if k.ifMatch != "" {
		req.Header.Set("If-Match", `"`+k.ifMatch+`"`)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The URL, never the token: it is not part of it.
		return nil, fmt.Errorf("doppel %s: %w", k.op.id, err)
	}
	return resp, nil
}

func wanted(status int, want []int) bool {
	for _, w := range want {
		if status == w {
			return true
		}
	}
	return false
}

func readBounded(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxAnswer+1))
	if err == nil && len(b) > maxAnswer {
		err = fmt.Errorf("the answer is over %d bytes", maxAnswer)
	}
	return b, err
}

// answerError is an answer of a status the operation does not succeed
// with: Doppel's envelope, or an answer of something else.
func answerError(op string, status int, body []byte) error {
	if e := ReadError(status, body); e != nil {
		e.Operation = op
		return e
	}
	return &Error{Operation: op, Status: status,
		Message: "the answer is not Doppel's error envelope: " + snippet(body)}
}

// ReadError reads an answer as Doppel's error envelope: the admin API's,
// or the proxy listener's (a loss, an unresolved request, a mock that
// failed to render) as a client under test received it. It returns nil
// when the body is not the envelope, such as an upstream's own error.
func ReadError(status int, body []byte) *Error {
	var env struct {
		Status  string `json:"status"`
		Message string `json:"message"`
		Code    string `json:"code"`
	}
	if json.Unmarshal(body, &env) != nil || env.Status != "error" || env.Code == "" {
		return nil
	}
	return &Error{Status: status, Code: env.Code, Message: env.Message}
}

// snippet is the start of an answer, for a message.
func snippet(b []byte) string {
	const max = 200
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "an empty body"
	}
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return fmt.Sprintf("%q", s)
}
