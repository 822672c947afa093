package fleet

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func signed(t testing.TB, key Key, method, url, target, caller string, at time.Time) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	key.Sign(req, nil, target, caller, at)
	return req
}

// TestASignedCallIsTakenOnce: a call signed with the fleet key for this
// replica is taken once, within 30 s of its time; any other is refused.
func TestASignedCallIsTakenOnce(t *testing.T) {
	key, _ := ParseKey(strings.Repeat("k", 40))
	other, _ := ParseKey(strings.Repeat("o", 40))
	now := time.Now()
	v := NewVerifier(key, "self")
	req := signed(t, key, "GET", "http://10.0.0.1:8081/api/v1/requests?proxy=shop&local=true", "self", "ci", now)
	if caller, err := v.Verify(req, nil, now); err != nil || caller != "ci" {
		t.Fatalf("a good call: %q %v", caller, err)
	}
	if _, err := v.Verify(req, nil, now); !errors.Is(err, ErrNotSigned) || !strings.Contains(err.Error(), "used already") {
		t.Fatalf("a replay: %v", err)
	}
	for name, c := range map[string]struct {
		req *http.Request
		at  time.Time
	}{
		"another key":     {signed(t, other, "GET", "http://h/api/v1/requests", "self", "ci", now), now},
		"another replica": {signed(t, key, "GET", "http://h/api/v1/requests", "peer", "ci", now), now},
		"too old":         {signed(t, key, "GET", "http://h/api/v1/requests", "self", "ci", now.Add(-31*time.Second)), now},
		"from the future": {signed(t, key, "GET", "http://h/api/v1/requests", "self", "ci", now.Add(31*time.Second)), now},
		"not signed":      {func() *http.Request { r, _ := http.NewRequest("GET", "http://h/", nil); return r }(), now},
		"a changed query": {func() *http.Request {
			r := signed(t, key, "GET", "http://h/api/v1/requests?proxy=a", "self", "", now)
			r.URL.RawQuery = "proxy=b"
			return r
		}(), now},
		"a changed caller": {func() *http.Request {
			r := signed(t, key, "GET", "http://h/x", "self", "viewer", now)
			r.Header.Set(HeaderCaller, "root")
			return r
		}(), now},
		"a changed method": {func() *http.Request {
			r := signed(t, key, "GET", "http://h/x", "self", "", now)
			r.Method = "DELETE"
			return r
		}(), now},
	} {
		if _, err := v.Verify(c.req, nil, c.at); !errors.Is(err, ErrNotSigned) {
			t.Errorf("%s: %v", name, err)
		}
	}
	body := []byte(`{"match": {"proxy": "shop"}}`)
	withBody := signed(t, key, "POST", "http://h/api/v1/requests/verify", "self", "ci", now)
	key.Sign(withBody, body, "self", "ci", now)
	if _, err := v.Verify(withBody, []byte(`{"match": {"proxy": "bank"}}`), now); !errors.Is(err, ErrNotSigned) {
		t.Errorf("another body: %v", err)
	}
	if _, err := v.Verify(withBody, body, now); err != nil {
		t.Errorf("the body signed: %v", err)
	}
	if _, err := (*Verifier)(nil).Verify(req, nil, now); !errors.Is(err, ErrNotSigned) {
		t.Error("a replica without a key took a call")
	}
	if _, err := ParseKey("short"); err == nil {
		t.Error("a short key")
	}
}

// FuzzVerify: no header a caller sends makes a verifier panic or take a
// call without the key.
func FuzzVerify(f *testing.F) {
	key, _ := ParseKey(strings.Repeat("k", 40))
	good := signed(f, key, "GET", "http://h/api/v1/requests", "self", "ci", time.Unix(1_700_000_000, 0))
	f.Add(good.Header.Get(HeaderTarget), good.Header.Get(HeaderTime), good.Header.Get(HeaderNonce), "ci", "0123")
	f.Fuzz(func(t *testing.T, target, at, nonce, caller, sig string) {
		r, _ := http.NewRequest("GET", "http://h/api/v1/requests", nil)
		r.Header.Set(HeaderTarget, target)
		r.Header.Set(HeaderTime, at)
		r.Header.Set(HeaderNonce, nonce)
		r.Header.Set(HeaderCaller, caller)
		r.Header.Set(HeaderSignature, sig)
		if _, err := NewVerifier(key, "self").Verify(r, nil, time.Unix(1_700_000_000, 0)); err == nil {
			t.Fatalf("a forged call was taken: %q %q %q %q %q", target, at, nonce, caller, sig)
		}
	})
}
