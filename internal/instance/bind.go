package instance

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// bindError says which listener could not bind where, which setting chose
// that address, and, for an address in use, how to free it or move.
// setting is the key or flag that set the address; other is how else to
// choose one.
func bindError(listener, addr, setting, other string, err error) error {
	msg := fmt.Sprintf("%s cannot bind %s (set by %s): %v", listener, addr, setting, err)
	if errors.Is(err, syscall.EADDRINUSE) {
		_, port, _ := net.SplitHostPort(addr)
		msg += fmt.Sprintf("; another process holds the port: stop it (`ss -ltnp 'sport = :%s'` shows which), or choose another port in %s", port, other)
	}
	return errors.New(msg)
}
