//go:build !linux

package proxy

import (
	"net"
	"time"
)

// acknowledged cannot tell on this system: there is no TCP_INFO to read.
func acknowledged(*net.TCPConn, time.Time) (acked, known bool) { return false, false }
