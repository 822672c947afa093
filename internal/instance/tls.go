package instance

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/internal/certs"
	"github.com/doppelproxy/doppel/internal/config"
)

// listenerCertificate is the proxy listener's certificate when server.tls
// is set (SPEC §17.7): the pair of files, watched for changes, or the one
// auto makes for the listener's names; nil without server.tls.
func listenerCertificate(doc *config.Document, o Options, addr string) (*certs.Source, error) {
	t := doc.Server.TLS
	if t == nil {
		return nil, nil
	}
	if !t.Auto {
		src, err := certs.Watch(string(t.Cert), string(t.Key), o.Log.Logger)
		if err != nil {
			return nil, fmt.Errorf("server.tls: %v", err)
		}
		c := src.Certificate().Leaf
		o.Log.Info("the proxy listener serves TLS; the certificate is read again when its files change",
			"cert", string(t.Cert), "key", string(t.Key), "serial", fmt.Sprintf("%x", c.SerialNumber),
			"not_after", c.NotAfter.UTC().Format(time.RFC3339))
		return src, nil
	}
	caFile, stateDir := t.AutoFiles(o.ConfigPath, o.StateHome)
	if caFile == "" || stateDir == "" {
		return nil, errors.New("server.tls.auto: there is no configuration file to keep the certificates beside, nor a home directory: set server.tls.state_dir and server.tls.ca_file")
	}
	// Absolute in the log, so that a person finds them.
	for _, p := range []*string{&caFile, &stateDir} {
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	host, _, _ := net.SplitHostPort(addr)
	names := certs.Names(host, externalHost(doc, o.ExternalURL)...)
	src, err := certs.Auto(certs.AutoOptions{StateDir: stateDir, CAFile: caFile, Names: names, Log: o.Log.Logger})
	if err != nil {
		return nil, fmt.Errorf("server.tls.auto: %v", err)
	}
	c := src.Certificate().Leaf
	o.Log.Info("the proxy listener serves TLS under Doppel's own CA; clients trust the CA certificate in ca_file",
		"ca_file", caFile, "names", strings.Join(names, ","),
		"not_after", c.NotAfter.UTC().Format(time.RFC3339))
	return src, nil
}

// externalHost is the host clients reach Doppel by when an address is
// configured (the environment's, else server.external_url), for auto's
// certificate; none when it is a template, known only per request.
func externalHost(doc *config.Document, fromEnv string) []string {
	raw := fromEnv
	if raw == "" && doc.Server.ExternalURL != nil {
		raw = doc.Server.ExternalURL.String()
	}
	if raw == "" || strings.Contains(raw, "{{") {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	return []string{u.Hostname()}
}
