package fleet

import (
	"net"
	"regexp"
	"strings"
	"testing"
)

func TestNewIDIs22URLSafeCharacters(t *testing.T) {
	seen := map[string]bool{}
	for range 5000 {
		id := NewID()
		if !regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{21}$`).MatchString(id) || seen[id] {
			t.Fatalf("%q", id)
		}
		seen[id] = true
	}
}

func TestAdvertise(t *testing.T) {
	tcp := func(s string) net.Addr { a, _ := net.ResolveTCPAddr("tcp", s); return a }
	if got := Advertise("https://doppel-2.internal:9443", tcp("127.0.0.1:8081")); got != "https://doppel-2.internal:9443" {
		t.Fatalf("given: %s", got)
	}
	if got := Advertise("", tcp("127.0.0.1:8081")); got != "http://127.0.0.1:8081" {
		t.Fatalf("a bound host: %s", got)
	}
	if got := Advertise("", tcp("[::1]:8081")); got != "http://[::1]:8081" {
		t.Fatalf("IPv6: %s", got)
	}
	got := Advertise("", tcp("0.0.0.0:8081"))
	if strings.Contains(got, "0.0.0.0") || !strings.HasPrefix(got, "http://") || !strings.HasSuffix(got, ":8081") {
		t.Fatalf("a wildcard host is not replaced: %s", got)
	}
	if Advertise("", nil) != "" {
		t.Fatal("no admin listener, no URL")
	}
}

func TestCheckAdvertiseRefusesWhatPeersCannotCall(t *testing.T) {
	for _, ok := range []string{"http://10.0.0.5:8081", "https://doppel.internal", "http://[fd00::1]:8081/"} {
		if err := CheckAdvertise(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"10.0.0.5:8081", "ftp://h", "http://", "http://u:p@h:1", "http://h/admin", "http://h?x=1", "http://h#f", "://"} {
		if err := CheckAdvertise(bad); err == nil || !strings.Contains(err.Error(), "not an admin URL peers can call") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
