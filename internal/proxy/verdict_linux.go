package proxy

import (
	"net"
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
