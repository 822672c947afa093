package proxy

import (
	"crypto/tls"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// acknowledged waits until the connection is closed (the client's kernel
// acknowledged Doppel's FIN, or reset the connection) or until passes, and
// reports whether every byte sent was acknowledged: a reset leaves the last
// ones unacknowledged. known is false when that could not be read.
//
// The wait is on the poller, without a goroutine of its own: each change of
// the socket's state wakes the read, which looks at TCP_INFO again.
func acknowledged(c *net.TCPConn, until time.Time) (acked, known bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return false, false
	}
	_ = c.SetReadDeadline(until)
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	var info *unix.TCPInfo
	var infoErr error
	err = rc.Read(func(fd uintptr) bool {
		info, infoErr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		return infoErr != nil || info.State == unix.BPF_TCP_CLOSE
	})
	if err != nil || infoErr != nil || info.State != unix.BPF_TCP_CLOSE {
		return false, false
	}
	// Bytes_acked counts the handshake's SYN and the FIN as well: a reset
	// that left any of the answer unacknowledged is short by more.
	sent := info.Bytes_sent - info.Bytes_retrans
	return info.Bytes_acked+2 >= sent, info.Bytes_sent > 0
}

// plainSocket is the socket under c when c is plain TCP (no TLS above
// it), for a parked answer that waits without reading; nil otherwise.
func plainSocket(c net.Conn) syscall.RawConn {
	for {
		switch l := c.(type) {
		case *net.TCPConn:
			rc, err := l.SyscallConn()
			if err != nil {
				return nil
			}
			return rc
		case *tls.Conn:
			return nil
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
}

// sentFIN reports, without waiting and without taking what it reads,
// whether the client of a parked answer sent its FIN or reset the
// connection; bytes it sent ahead (a next request) come first, and the
// server reads them, and the FIN after them, once the connection is back.
func sentFIN(rc syscall.RawConn) bool {
	var n int
	var rerr error
	err := rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return true
	})
	switch {
	case err != nil:
		return true
	case rerr == unix.EAGAIN:
		return false
	case rerr != nil:
		return true
	}
	return n == 0
}
