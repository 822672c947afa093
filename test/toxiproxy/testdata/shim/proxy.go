package toxiproxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/rs/zerolog"
)

// ErrProxyAlreadyStarted is Start's answer for a proxy Doppel has
// listening already; the text is Toxiproxy's.
var ErrProxyAlreadyStarted = errors.New("Proxy already started")

// Proxy is a proxy of the tests. Toxiproxy makes it in process and starts
// it there; here it is made on Doppel when first started (or given a
// toxic), and its fields are what Doppel last answered for it.
type Proxy struct {
	sync.Mutex

	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Enabled  bool   `json:"enabled"`

	Toxics    *ToxicCollection `json:"-"`
	Logger    *zerolog.Logger
	apiServer *ApiServer
}

// proxyState is a proxy as Doppel answers it.
type proxyState struct {
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Enabled  bool   `json:"enabled"`
}

// proxyInput is what the API takes to make a proxy or change one; an
// empty listen or upstream leaves the proxy's own.
type proxyInput struct {
	Name     string `json:"name,omitempty"`
	Listen   string `json:"listen,omitempty"`
	Upstream string `json:"upstream,omitempty"`
	Enabled  bool   `json:"enabled"`
}

func NewProxy(server *ApiServer, name, listen, upstream string) *Proxy {
	l := server.Logger.With().Str("name", name).Str("listen", listen).Str("upstream", upstream).Logger()
	proxy := &Proxy{Name: name, Listen: listen, Upstream: upstream, Logger: &l, apiServer: server}
	proxy.Toxics = &ToxicCollection{proxy: proxy}
	return proxy
}

// Start makes the proxy on Doppel, listening, or enables the one made;
// ErrProxyAlreadyStarted when Doppel has it listening.
func (proxy *Proxy) Start() error {
	proxy.Lock()
	defer proxy.Unlock()
	var err error
	if proxy.onDoppel(func() { err = proxy.enable() }) {
		return err
	}
	return proxy.make(true, false)
}

func (proxy *Proxy) enable() error {
	var now proxyState
	if err := call(http.MethodGet, proxyPath(proxy.Name), nil, http.StatusOK, &now); err != nil {
		return err
	}
	if now.Enabled {
		proxy.set(now)
		return ErrProxyAlreadyStarted
	}
	return proxy.update(proxyInput{Listen: proxy.Listen, Upstream: proxy.Upstream, Enabled: true})
}

// Stop disables the proxy on Doppel, which stops listening and ends its
// connections, as Toxiproxy's Stop does.
func (proxy *Proxy) Stop() {
	proxy.Lock()
	defer proxy.Unlock()
	proxy.onDoppel(func() {
		if err := proxy.update(proxyInput{Enabled: false}); err != nil {
			note("stopping %s: %v", proxy.Name, err)
		}
	})
}

// Update gives Doppel the input's listen, upstream and enabled, which it
// applies as Toxiproxy's Update does: a proxy whose address differs is
// restarted, one whose enabled differs started or stopped.
func (proxy *Proxy) Update(input *Proxy) error {
	proxy.Lock()
	defer proxy.Unlock()
	var err error
	in := proxyInput{Listen: input.Listen, Upstream: input.Upstream, Enabled: input.Enabled}
	if proxy.onDoppel(func() { err = proxy.update(in) }) {
		return err
	}
	proxy.Listen, proxy.Upstream = input.Listen, input.Upstream
	if input.Enabled {
		return proxy.make(true, false)
	}
	return nil
}

// Differs is a comparison Toxiproxy's server makes in process (for
// populate); the API has no counterpart. TestProxyDiffers, which tests
// it, is excluded, and populate's use of it is TestPopulateExistingProxy.
func (proxy *Proxy) Differs(*Proxy) (bool, error) {
	return false, errors.New("Differs is Toxiproxy's own comparison: Doppel's API does not serve it")
}

func (proxy *Proxy) update(in proxyInput) error {
	var now proxyState
	if err := call(http.MethodPost, proxyPath(proxy.Name), in, http.StatusOK, &now); err != nil {
		return err
	}
	proxy.set(now)
	return nil
}

func (proxy *Proxy) set(now proxyState) {
	proxy.Listen, proxy.Upstream, proxy.Enabled = now.Listen, now.Upstream, now.Enabled
}

// Each of Toxiproxy's servers has proxies of its own, and the tests make a
// server for each proxy, reusing names ("test") from test to test; Doppel
// has one set of names. names says which proxy of the tests holds each
// name on Doppel. A proxy started under a name that a proxy of another
// server holds takes it: the other is deleted first (no test uses two
// servers' proxies of one name at once), and is displaced, as are those
// a Clear deletes. Calls on Doppel
// for a proxy are made while names is read-locked and the proxy holds its
// name, so that a call left running from a test before (a goroutine the
// test did not wait for) never lands on the proxy that took the name.
var names = struct {
	sync.RWMutex
	of map[string]*Proxy
	// displaced are the proxies whose name another server's took.
	displaced map[*Proxy]bool
}{of: map[string]*Proxy{}, displaced: map[*Proxy]bool{}}

// onDoppel runs f if the proxy holds its name on Doppel, and says if it
// did.
func (proxy *Proxy) onDoppel(f func()) bool {
	names.RLock()
	defer names.RUnlock()
	if names.of[proxy.Name] != proxy {
		return false
	}
	f()
	return true
}

// make makes the proxy on Doppel, taking its name from another server's
// proxy. implicit is a proxy made to hold a toxic, never one displaced.
func (proxy *Proxy) make(enabled, implicit bool) error {
	names.Lock()
	defer names.Unlock()
	if names.displaced[proxy] && implicit {
		return fmt.Errorf("another server's proxy took the name %s on Doppel", proxy.Name)
	}
	if prev := names.of[proxy.Name]; prev != nil && prev.apiServer != proxy.apiServer {
		err := call(http.MethodDelete, proxyPath(proxy.Name), nil, http.StatusNoContent, nil)
		if err != nil && !notFound(err) {
			return err
		}
		delete(names.of, proxy.Name)
		names.displaced[prev] = true
	}
	var made proxyState
	in := proxyInput{Name: proxy.Name, Listen: proxy.Listen, Upstream: proxy.Upstream, Enabled: enabled}
	if err := call(http.MethodPost, "/proxies", in, http.StatusCreated, &made); err != nil {
		return err
	}
	names.of[proxy.Name] = proxy
	delete(names.displaced, proxy)
	proxy.set(made)
	return nil
}

// clearOnce deletes, the first time this process makes a server, every
// proxy Doppel has: a test process starts with no Toxiproxy server, and
// the proxies of the one before it (another package's) died with it.
var clearOnce sync.Once

func clearDoppel() {
	clearOnce.Do(func() {
		if err := (&ProxyCollection{}).Clear(); err != nil {
			note("deleting the proxies of the process before: %v", err)
		}
	})
}

func proxyPath(name string) string { return "/proxies/" + url.PathEscape(name) }

func notFound(err error) bool {
	var e *ApiError
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}
