package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
)

// Why an exchange with the upstream failed, as the request line's cause
// says it: one word a log query can count by.
const (
	causeRefused = "connection_refused" // nothing listens at the upstream's address
	causeDNS     = "dns"                // the upstream's name did not resolve
	causeTLS     = "tls"                // the handshake failed, or the certificate was refused
	causeReset   = "reset"              // the upstream reset the connection
	causeTimeout = "timeout"            // a dial or a read gave up waiting
	causeEOF     = "eof"                // the upstream closed the connection without an answer
	causeOther   = "other"
)

// upstreamCause classifies a transport error. The order matters where
// one error is several: a DNS lookup that timed out is a DNS failure.
func upstreamCause(err error) string {
	var dns *net.DNSError
	var certInvalid x509.CertificateInvalidError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	var alert tls.AlertError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return causeRefused
	case errors.As(err, &dns):
		return causeDNS
	case errors.As(err, &verify), errors.As(err, &certInvalid), errors.As(err, &unknownCA),
		errors.As(err, &hostname), errors.As(err, &record), errors.As(err, &alert):
		return causeTLS
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return causeReset
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return causeTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return causeEOF
	}
	return causeOther
}

// upstreamReason is the transport error's text without the request URL
// that url.Error repeats: its query may carry a client's credentials.
// The upstream's own credentials are never in it (rewrite drops them).
func upstreamReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
