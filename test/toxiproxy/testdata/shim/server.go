package toxiproxy

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/Shopify/toxiproxy/v2/collectors"
)

// Version is what a Toxiproxy built from source without a release's
// -ldflags reports. No test that reads it runs against Doppel
// (TestVersionEndpointReturnsVersion is excluded: it pins a build string).
var Version = "git"

// ApiServer is one of the tests' Toxiproxy servers. Each has a collection
// of its own in Toxiproxy; here all of them are the one Doppel, whose
// proxies share one set of names (see names, in proxy.go).
type ApiServer struct {
	Collection *ProxyCollection
	Metrics    *MetricsContainer
	Logger     *zerolog.Logger
}

// MetricsContainer holds what the tests set; Doppel keeps its own metrics.
type MetricsContainer struct {
	RuntimeMetrics *collectors.RuntimeMetricCollectors
	ProxyMetrics   *collectors.ProxyMetricCollectors
}

// NewMetricsContainer takes the registry Toxiproxy's would; Doppel's
// metrics are never registered in it.
func NewMetricsContainer(*prometheus.Registry) *MetricsContainer {
	return &MetricsContainer{}
}

func NewServer(m *MetricsContainer, logger zerolog.Logger) *ApiServer {
	clearDoppel()
	return &ApiServer{Collection: &ProxyCollection{}, Metrics: m, Logger: &logger}
}

// Listen stands for serving the API at the address the tests' client then
// uses: Doppel serves it, so Listen checks that the address is Doppel's
// and returns once Doppel answers there. Toxiproxy 2.5.0's tests call it
// with a host and a port, later releases' with HOST:PORT.
func (server *ApiServer) Listen(addr ...string) error {
	a := strings.Join(addr, ":")
	if len(addr) == 2 {
		a = net.JoinHostPort(addr[0], addr[1])
	}
	u, err := url.Parse(doppelURL)
	if err != nil {
		return err
	}
	_, port, err := net.SplitHostPort(a)
	if err != nil || port != u.Port() {
		err = fmt.Errorf("the tests serve the API at %q, Doppel serves it at %s", a, u.Host)
		note("%v", err)
		return err
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := web.Get(doppelURL + "/version")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			err = fmt.Errorf("no answer from Doppel at %s: %v", doppelURL, err)
			note("%v", err)
			return err
		}
	}
}

// ProxyCollection is a server's proxies.
type ProxyCollection struct{}

// Clear deletes every proxy Doppel has, as Toxiproxy's Clear does the
// server's between tests: those of the tests' other servers too, which
// Toxiproxy's API would not list, and the tests do not use again.
func (collection *ProxyCollection) Clear() error {
	var all map[string]struct {
		Name string `json:"name"`
	}
	names.Lock()
	defer names.Unlock()
	if err := call(http.MethodGet, "/proxies", nil, http.StatusOK, &all); err != nil {
		return err
	}
	for name := range all {
		err := call(http.MethodDelete, proxyPath(name), nil, http.StatusNoContent, nil)
		if err != nil && !notFound(err) {
			return err
		}
		if p := names.of[name]; p != nil {
			names.displaced[p] = true
			delete(names.of, name)
		}
	}
	return nil
}
