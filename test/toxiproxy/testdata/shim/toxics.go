package toxiproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// ToxicCollection is a proxy's toxics, which Doppel keeps: each call is
// one request to the proxy's toxics on Doppel.
type ToxicCollection struct {
	proxy *Proxy
}

// errToxicNotFound is Toxiproxy's answer for a toxic of a proxy that does
// not hold its name on Doppel (not made there yet, or displaced), so has
// none.
var errToxicNotFound = &ApiError{Message: "toxic not found", StatusCode: http.StatusNotFound}

// toxicState is a toxic as Doppel answers it.
type toxicState struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Stream     string          `json:"stream"`
	Toxicity   float32         `json:"toxicity"`
	Attributes json.RawMessage `json:"attributes"`
}

// AddToxicJson sends the tests' JSON as it is; Doppel fills in the
// defaults (stream, toxicity, name).
func (c *ToxicCollection) AddToxicJson(data io.Reader) (*toxics.ToxicWrapper, error) {
	body, err := io.ReadAll(data)
	if err != nil {
		return nil, err
	}
	if err := c.made(); err != nil {
		return nil, err
	}
	var t toxicState
	err = c.call(http.MethodPost, "", body, http.StatusOK, &t)
	if err != nil {
		return nil, err
	}
	return t.wrapper()
}

func (c *ToxicCollection) UpdateToxicJson(name string, data io.Reader) (*toxics.ToxicWrapper, error) {
	body, err := io.ReadAll(data)
	if err != nil {
		return nil, err
	}
	var t toxicState
	if err := c.call(http.MethodPost, name, body, http.StatusOK, &t); err != nil {
		return nil, err
	}
	return t.wrapper()
}

func (c *ToxicCollection) RemoveToxic(_ context.Context, name string) error {
	return c.call(http.MethodDelete, name, nil, http.StatusNoContent, nil)
}

// ResetToxics removes each of the proxy's toxics.
func (c *ToxicCollection) ResetToxics(ctx context.Context) {
	var all []toxicState
	if err := c.call(http.MethodGet, "", nil, http.StatusOK, &all); err != nil {
		if err != errToxicNotFound {
			note("listing the toxics of %s: %v", c.proxy.Name, err)
		}
		return
	}
	for _, t := range all {
		if err := c.RemoveToxic(ctx, t.Name); err != nil {
			note("removing %s from %s: %v", t.Name, c.proxy.Name, err)
		}
	}
}

func (c *ToxicCollection) GetToxic(name string) *toxics.ToxicWrapper {
	var t toxicState
	if err := c.call(http.MethodGet, name, nil, http.StatusOK, &t); err != nil {
		return nil
	}
	w, err := t.wrapper()
	if err != nil {
		return nil
	}
	return w
}

// made makes sure the proxy is on Doppel, which holds a proxy's toxics:
// one not started yet is made there disabled.
func (c *ToxicCollection) made() error {
	p := c.proxy
	p.Lock()
	defer p.Unlock()
	if p.onDoppel(func() {}) {
		return nil
	}
	return p.make(false, true)
}

// call calls Doppel for the proxy's toxics (toxic "": all of them) while
// the proxy holds its name there; a proxy that does not has no toxic.
func (c *ToxicCollection) call(method, toxic string, body interface{}, want int, out interface{}) error {
	path := proxyPath(c.proxy.Name) + "/toxics"
	if toxic != "" {
		path += "/" + url.PathEscape(toxic)
	}
	var err error = errToxicNotFound
	c.proxy.onDoppel(func() { err = call(method, path, body, want, out) })
	return err
}

// wrapper is the toxic as Toxiproxy's own type, its attributes decoded
// into the toxic of its type.
func (t toxicState) wrapper() (*toxics.ToxicWrapper, error) {
	w := &toxics.ToxicWrapper{Name: t.Name, Type: t.Type, Stream: t.Stream, Toxicity: t.Toxicity}
	if toxics.New(w) == nil {
		return nil, fmt.Errorf("Doppel answered a toxic of type %q, which Toxiproxy has not", t.Type)
	}
	if len(t.Attributes) > 0 {
		if err := json.Unmarshal(t.Attributes, w.Toxic); err != nil {
			return nil, fmt.Errorf("Doppel answered attributes Toxiproxy's %s cannot read: %w", t.Type, err)
		}
	}
	d, err := stream.ParseDirection(t.Stream)
	if err != nil {
		return nil, fmt.Errorf("Doppel answered the stream %q: %w", t.Stream, err)
	}
	w.Direction = d
	return w, nil
}
