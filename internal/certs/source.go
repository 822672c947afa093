package certs

import (
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// debounce gathers the events one replacement makes (a new file written,
// renamed over the old one, the key after the certificate) into one
// reload.
const debounce = 250 * time.Millisecond

// soon is how close to its end a certificate is said to expire soon.
const soon = 30 * 24 * time.Hour

// Source is the certificate the proxy listener presents, behind an atomic
// pointer: a handshake loads it, a reload swaps it whole.
type Source struct {
	current atomic.Pointer[tls.Certificate]
	stop    func() // ends the watching; nil when nothing is watched
	once    sync.Once
}

// Fixed is a source that always presents c.
func Fixed(c *tls.Certificate) *Source {
	s := &Source{}
	s.current.Store(c)
	return s
}

// Certificate is the certificate in force.
func (s *Source) Certificate() *tls.Certificate { return s.current.Load() }

// Config is the listener's TLS configuration: the certificate in force at
// each handshake, HTTP/2 and HTTP/1.1 offered by ALPN.
func (s *Source) Config() *tls.Config {
	return &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.current.Load(), nil },
		NextProtos:     []string{"h2", "http/1.1"},
		MinVersion:     tls.VersionTLS12,
	}
}

// Close ends the watching; the certificate in force stays usable.
func (s *Source) Close() error {
	s.once.Do(func() {
		if s.stop != nil {
			s.stop()
		}
	})
	return nil
}

// Listen serves TLS on ln with the source's certificate. Closing the
// listener closes the source.
func (s *Source) Listen(ln net.Listener) net.Listener {
	return &listener{Listener: ln, cfg: s.Config(), src: s}
}

type listener struct {
	net.Listener
	cfg *tls.Config
	src *Source
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := tls.Server(c, l.cfg)
	return &conn{Conn: tc, tls: tc, raw: c}, nil
}

func (l *listener) Close() error {
	err := l.Listener.Close()
	_ = l.src.Close()
	return err
}

// conn is a server side TLS connection as the proxy's cuts need it: it
// has no NetConn, so a cut's SetLinger and CloseWrite stop here, where
// they mean what they say over TLS. A reset (linger 0) closes the TCP
// connection without a close_notify alert, so the client reads
// ECONNRESET rather than a clean end; a close sends close_notify, then a
// FIN. A client speaking plain HTTP to it is answered with a 400 saying
// so, as net/http does for a *tls.Conn it handshakes itself, rather than
// with a bare close.
type conn struct {
	net.Conn // tls, as a net.Conn: none of *tls.Conn's other methods
	tls      *tls.Conn
	raw      net.Conn
	reset    atomic.Bool
	told     bool
}

// plainHTTPAnswer is what a client speaking plain HTTP gets.
const plainHTTPAnswer = "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n" +
	"Client sent an HTTP request to an HTTPS server: Doppel's proxy listener serves TLS; use an https:// URL.\n"

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	var re tls.RecordHeaderError
	if err != nil && !c.told && errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
		c.told = true
		_ = re.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(re.Conn, plainHTTPAnswer)
	}
	return n, err
}

// SetLinger sets the TCP connection's; 0 makes Close a reset.
func (c *conn) SetLinger(sec int) error {
	l, ok := c.raw.(interface{ SetLinger(int) error })
	if !ok {
		return errors.New("the connection has no linger")
	}
	c.reset.Store(sec == 0)
	return l.SetLinger(sec)
}

// CloseWrite ends the writing side: close_notify, then a FIN.
func (c *conn) CloseWrite() error {
	if err := c.tls.CloseWrite(); err != nil {
		return err
	}
	if cw, ok := c.raw.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *conn) Close() error {
	if c.reset.Load() {
		return c.raw.Close()
	}
	return c.tls.Close()
}

// looksLikeHTTP is net/http's test of the five bytes a TLS record header
// would be: the start of a request line.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH", "CONNE":
		return true
	}
	return false
}

// Watch loads the pair in certFile and keyFile and reads it again when
// either changes: their directories are watched (a file renamed over
// another, or a Kubernetes secret's symbolic links swapped, changes no
// file in place). A pair that fails to load after a change is logged with
// the reason, which names the file, and the last good one stays in force.
func Watch(certFile, keyFile string, log *slog.Logger) (_ *Source, err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("cannot watch %s: %v", certFile, err)
	}
	defer func() {
		if err != nil {
			_ = w.Close()
		}
	}()
	r := &reloader{certFile: certFile, keyFile: keyFile, log: log}
	certPEM, keyPEM, seen, err := r.read()
	if err != nil {
		return nil, err
	}
	cert, err := ParsePair(certPEM, keyPEM, certFile, keyFile, time.Now())
	if err != nil {
		return nil, err
	}
	dirs := map[string]bool{}
	for _, f := range []string{certFile, keyFile} {
		dir := filepath.Dir(f)
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		if dirs[dir] {
			continue
		}
		dirs[dir] = true
		if err := w.Add(dir); err != nil {
			return nil, fmt.Errorf("cannot watch %s: %v", dir, err)
		}
	}
	// The first reading names a missing or bad file better than a failed
	// watch would; a change between it and the watching is read again.
	if _, _, again, _ := r.read(); again != seen {
		seen = ""
	}
	s := Fixed(cert)
	r.src, r.seen = s, seen
	warnIfEnding(log, cert, certFile)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if seen == "" {
			r.reload()
		}
		r.run(w, done)
	}()
	s.stop = func() { close(done); <-stopped; _ = w.Close() }
	return s, nil
}

// reloader reads the pair again after its directories changed.
type reloader struct {
	src               *Source
	certFile, keyFile string
	log               *slog.Logger
	// seen is what the files held at the last reading, loaded or not (or
	// why they could not be read): a change elsewhere in the directories,
	// or the same broken pair, is not reported again.
	seen string
}

func (r *reloader) run(w *fsnotify.Watcher, done <-chan struct{}) {
	var fire <-chan time.Time
	for {
		select {
		case <-done:
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			fire = time.After(debounce)
		case <-fire:
			fire = nil
			r.reload()
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			r.log.Warn("watching the proxy listener's certificate failed", "cert", r.certFile, "key", r.keyFile, "error", err.Error())
		}
	}
}

// read is both files' contents and a fingerprint of what was read.
func (r *reloader) read() (certPEM, keyPEM []byte, seen string, err error) {
	if certPEM, err = readBounded(r.certFile); err == nil {
		keyPEM, err = readBounded(r.keyFile)
	}
	if err != nil {
		return nil, nil, "unread: " + err.Error(), err
	}
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%d:", len(certPEM))
	h.Write(certPEM)
	h.Write(keyPEM)
	return certPEM, keyPEM, string(h.Sum(nil)), nil
}

func (r *reloader) reload() {
	certPEM, keyPEM, seen, err := r.read()
	if seen == r.seen {
		return
	}
	r.seen = seen
	var cert *tls.Certificate
	if err == nil {
		cert, err = ParsePair(certPEM, keyPEM, r.certFile, r.keyFile, time.Now())
	}
	if err != nil {
		r.log.Error("the proxy listener's changed certificate cannot be used; the previous one stays in force: "+err.Error(),
			"cert", r.certFile, "key", r.keyFile, "serial", serialOf(r.src.Certificate()))
		return
	}
	r.src.current.Store(cert)
	r.log.Info("the proxy listener's certificate changed; new handshakes present it",
		"cert", r.certFile, "serial", serialOf(cert), "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	warnIfEnding(r.log, cert, r.certFile)
}

func warnIfEnding(log *slog.Logger, c *tls.Certificate, certFile string) {
	if left := time.Until(c.Leaf.NotAfter); left < soon {
		log.Warn("the proxy listener's certificate expires soon", "cert", certFile,
			"not_after", c.Leaf.NotAfter.UTC().Format(time.RFC3339), "days_left", int(left.Hours()/24))
	}
}

func serialOf(c *tls.Certificate) string {
	if c == nil || c.Leaf == nil {
		return ""
	}
	return fmt.Sprintf("%x", c.Leaf.SerialNumber)
}
