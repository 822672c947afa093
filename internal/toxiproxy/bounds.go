package toxiproxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bounds of what a client may make (SPEC §18.4): with them the server's
// memory is bounded whatever its clients send, as the admin API's is.
const (
	MaxBody    = 64 << 10 // bytes of one request body
	MaxProxies = 1000
	MaxToxics  = 100 // per proxy
	MaxName    = 255 // characters of a proxy's or a toxic's name
)

// maxHost is the longest host an address may name: DNS's limit.
const maxHost = 253

// resolveTimeout bounds looking up the host a listen or an upstream names.
const resolveTimeout = 5 * time.Second

// Listener is one of Doppel's own TCP listeners: an upstream that is one
// of them is refused, so that a proxy cannot open a listener (the admin
// API's, say) to whoever reaches the proxy.
type Listener struct {
	Name string // what it is, for the message: "the admin API"
	Addr net.Addr
}

// checkName refuses a name that is not 1 to MaxName characters of
// [A-Za-z0-9._-], or that a path cannot name ("." and "..").
func checkName(field, name string) *apiError {
	ok := len(name) >= 1 && len(name) <= MaxName && name != "." && name != ".."
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if ok {
		return nil
	}
	return badBody(fmt.Errorf("%s %s is not 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", field, clip(name), MaxName))
}

// clip quotes s for a message, cut to its first 40 bytes: a message never
// repeats a long input whole.
func clip(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "…"
	}
	return strconv.Quote(s)
}

// address is a listen or an upstream as a client wrote it, and the IP
// addresses its host stands for.
type address struct {
	text string
	host string
	port uint16
	ips  []netip.Addr // none when the host could not be resolved
}

// parseAddress reads HOST:PORT, the port a number; minPort is 0 for a
// listen (any free port), 1 for an upstream.
func parseAddress(field, s string, minPort int) (*address, *apiError) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, badBody(fmt.Errorf("%s %s is not HOST:PORT", field, clip(s)))
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < minPort || n > 65535 {
		return nil, badBody(fmt.Errorf("%s %s: the port is not a number from %d to 65535", field, clip(s), minPort))
	}
	if len(host) > maxHost {
		return nil, badBody(fmt.Errorf("%s %s: the host is longer than %d characters", field, clip(s), maxHost))
	}
	return &address{text: s, host: host, port: uint16(n)}, nil
}

// resolve finds the IP addresses a's host stands for: itself for an IP
// address, none for an empty host (every interface), else its lookup.
func (a *address) resolve(ctx context.Context) error {
	if a.host == "" {
		return nil
	}
	if ip, err := netip.ParseAddr(a.host); err == nil {
		a.ips = []netip.Addr{ip.Unmap()}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", a.host)
	for _, ip := range ips {
		a.ips = append(a.ips, ip.Unmap())
	}
	return err
}

// listenPolicy says where a proxy may listen: on a loopback address, on
// the API's own host (a container binding the API to 0.0.0.0 listens
// there too, as Testcontainers' modules need), or on an address the
// document's toxiproxy.allow_listen names.
type listenPolicy struct {
	host  netip.Addr
	allow []netip.Addr
}

func (lp listenPolicy) allows(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	return ip.IsLoopback() || ip == lp.host.Unmap() || slices.ContainsFunc(lp.allow, func(a netip.Addr) bool { return a.Unmap() == ip })
}

// wildcard is the address standing for every interface that the policy
// allows, for a listen with no host; false when it allows none.
func (lp listenPolicy) wildcard() (netip.Addr, bool) {
	for _, a := range append([]netip.Addr{lp.host}, lp.allow...) {
		if a.IsValid() && a.IsUnspecified() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// bind is the address a proxy listens on for listen: an IP address the
// policy allows, and the port. A host name is looked up once and its
// address bound, so that what was checked is what listens.
func (lp listenPolicy) bind(ctx context.Context, listen string) (string, *apiError) {
	a, e := parseAddress("listen", listen, 0)
	if e != nil {
		return "", e
	}
	port := strconv.Itoa(int(a.port))
	if a.host == "" {
		if w, ok := lp.wildcard(); ok {
			return net.JoinHostPort(w.String(), port), nil
		}
		return "", lp.refuse(listen)
	}
	if err := a.resolve(ctx); err != nil || len(a.ips) == 0 {
		return "", badBody(fmt.Errorf("listen %s: the host cannot be resolved", clip(listen)))
	}
	ip := a.ips[0]
	for _, c := range a.ips {
		if c.Is4() { // as net.Listen prefers
			ip = c
			break
		}
	}
	if !lp.allows(ip) {
		return "", lp.refuse(listen)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

func (lp listenPolicy) refuse(listen string) *apiError {
	return badBody(fmt.Errorf("listen %s is not a loopback address nor toxiproxy.host (%s): a proxy listens elsewhere only where toxiproxy.allow_listen names the address", clip(listen), lp.hostText()))
}

func (lp listenPolicy) hostText() string {
	if !lp.host.IsValid() {
		return "none"
	}
	return lp.host.String()
}

// upstream reads an upstream and resolves its host. A host that cannot
// be resolved now is taken, as Toxiproxy takes it: the relay looks it up
// for each connection.
func upstream(ctx context.Context, s string) (*address, *apiError) {
	a, e := parseAddress("upstream", s, 1)
	if e != nil {
		return nil, e
	}
	if a.host == "" {
		return nil, badBody(fmt.Errorf("upstream %s: the host is empty", clip(s)))
	}
	_ = a.resolve(ctx)
	return a, nil
}

// ownListener names the listener of own that a reaches, if any. A
// listener on every interface is reached through any of the machine's
// addresses, and an upstream of 0.0.0.0 or :: reaches the machine itself.
func ownListener(a *address, own []Listener) (Listener, bool) {
	var local []netip.Addr // the machine's addresses, looked up once if needed
	isLocal := func(ip netip.Addr) bool {
		if ip.IsLoopback() || ip.IsUnspecified() {
			return true
		}
		if local == nil {
			local = []netip.Addr{}
			if addrs, err := net.InterfaceAddrs(); err == nil {
				for _, x := range addrs {
					if p, err := netip.ParsePrefix(x.String()); err == nil {
						local = append(local, p.Addr().Unmap())
					}
				}
			}
		}
		return slices.Contains(local, ip)
	}
	for _, l := range own {
		ap, ok := addrPort(l.Addr)
		if !ok || ap.Port() != a.port {
			continue
		}
		at := ap.Addr()
		for _, ip := range a.ips {
			ip = ip.WithZone("")
			if ip == at || at.IsUnspecified() && isLocal(ip) || ip.IsUnspecified() && isLocal(at) {
				return l, true
			}
		}
	}
	return Listener{}, false
}

func addrPort(a net.Addr) (netip.AddrPort, bool) {
	if a == nil {
		return netip.AddrPort{}, false
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().WithZone("").Unmap(), ap.Port()), true
}

func refuseOwn(a *address, l Listener) *apiError {
	return badBody(fmt.Errorf("upstream %s is Doppel's own %s (%s): a proxy would open it to whoever reaches the proxy", clip(a.text), l.Name, l.Addr))
}

// isBrowser is Toxiproxy's check, ignoring case: a web page must not
// drive the API from a user's machine.
func isBrowser(userAgent string) bool {
	const prefix = "mozilla/"
	return len(userAgent) >= len(prefix) && strings.EqualFold(userAgent[:len(prefix)], prefix)
}
