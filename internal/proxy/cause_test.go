package proxy

import (
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestUpstreamCause(t *testing.T) {
	wrap := func(err error) error {
		return &url.Error{Op: "Get", URL: "http://127.0.0.1:9/x?api_key=s3cret", Err: err}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, causeRefused},
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "h.invalid", IsNotFound: true}}, causeDNS},
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "i/o timeout", Name: "h", IsTimeout: true}}, causeDNS},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, causeReset},
		{&net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, causeReset},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, causeTimeout},
		{io.EOF, causeEOF},
		{io.ErrUnexpectedEOF, causeEOF},
		{errors.New("something else"), causeOther},
	} {
		if got := upstreamCause(wrap(c.err)); got != c.want {
			t.Errorf("%v: %s, want %s", c.err, got, c.want)
		}
		if r := upstreamReason(wrap(c.err)); strings.Contains(r, "s3cret") || r != c.err.Error() {
			t.Errorf("the reason of %v is %q, want the transport's text alone", c.err, r)
		}
	}
}
