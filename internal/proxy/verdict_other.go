//go:build !linux

package proxy

import (
	"net"
	"syscall"
	"time"
)

// acknowledged cannot tell on this system: there is no TCP_INFO to read.
func acknowledged(*net.TCPConn, time.Time) (acked, known bool) { return false, false }

// plainSocket is nil: a parked answer waits on a read of its own here.
func plainSocket(net.Conn) syscall.RawConn { return nil }

// sentFIN is never asked here (plainSocket).
func sentFIN(syscall.RawConn) bool { return false }
