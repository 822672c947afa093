package fleet

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

const selfURL = "http://10.0.0.1:8081"

var ci = Identity{Name: "ci", Group: "admin", Proof: "p"}

func signed(t testing.TB, key Key, method, url, target, targetURL string, who Identity, at time.Time) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	key.Sign(req, nil, target, targetURL, who, at)
	return req
}

// TestASignedCallIsTakenOnce: a call signed with the fleet key for this
// replica at its URL is taken once, within 30 s of its time; any other is
// refused, and so is one whose identity or body was changed.
func TestASignedCallIsTakenOnce(t *testing.T) {
	key, _ := ParseKey(strings.Repeat("k", 40))
	other, _ := ParseKey(strings.Repeat("o", 40))
	now := time.Now()
	v := NewVerifier(key, "self", selfURL)
	req := signed(t, key, "GET", selfURL+"/api/v1/requests?proxy=shop&local=true", "self", selfURL, ci, now)
	if who, err := v.Verify(req, nil, now); err != nil || who != ci {
		t.Fatalf("a good call: %+v %v", who, err)
	}
	if _, err := v.Verify(req, nil, now); !errors.Is(err, ErrNotSigned) || !strings.Contains(err.Error(), "used already") {
		t.Fatalf("a replay: %v", err)
	}
	for name, c := range map[string]*http.Request{
		"another key":        signed(t, other, "GET", "http://h/api/v1/requests", "self", selfURL, ci, now),
		"another replica":    signed(t, key, "GET", "http://h/api/v1/requests", "peer", selfURL, ci, now),
		"relayed from a URL": signed(t, key, "GET", "http://h/api/v1/requests", "self", "http://evil:8081", ci, now),
		"too old":            signed(t, key, "GET", "http://h/api/v1/requests", "self", selfURL, ci, now.Add(-31*time.Second)),
		"from the future":    signed(t, key, "GET", "http://h/api/v1/requests", "self", selfURL, ci, now.Add(31*time.Second)),
		"not signed":         func() *http.Request { r, _ := http.NewRequest("GET", "http://h/", nil); return r }(),
		"a changed query": func() *http.Request {
			r := signed(t, key, "GET", "http://h/api/v1/requests?proxy=a", "self", selfURL, ci, now)
			r.URL.RawQuery = "proxy=b"
			return r
		}(),
		"a changed group": func() *http.Request {
			r := signed(t, key, "GET", "http://h/x", "self", selfURL, Identity{Name: "viewer", Group: "user"}, now)
			r.Header.Set(HeaderGroup, "admin")
			return r
		}(),
		"a changed method": func() *http.Request {
			r := signed(t, key, "GET", "http://h/x", "self", selfURL, ci, now)
			r.Method = "DELETE"
			return r
		}(),
	} {
		if _, err := v.Verify(c, nil, now); !errors.Is(err, ErrNotSigned) {
			t.Errorf("%s: %v", name, err)
		}
	}
	body := []byte(`{"match": {"proxy": "shop"}}`)
	withBody, _ := http.NewRequest("POST", "http://h/api/v1/requests/verify", nil)
	key.Sign(withBody, body, "self", selfURL, ci, now)
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
	if key.Proof("a") == key.Proof("b") || key.Proof("a") == other.Proof("a") {
		t.Error("a proof does not tell tokens or keys apart")
	}
}

// TestAnAnswerIsSigned: an answer counts only when the fleet key signed it
// for that call, its status and its body.
func TestAnAnswerIsSigned(t *testing.T) {
	key, _ := ParseKey(strings.Repeat("k", 40))
	req := signed(t, key, "GET", "http://h/api/v1/requests", "self", selfURL, ci, time.Now())
	body := []byte(`{"requests": []}`)
	res := &http.Response{StatusCode: 200, Header: http.Header{}}
	res.Header.Set(HeaderAnswer, key.SignAnswer(req.Header.Get(HeaderNonce), 200, body))
	if err := key.CheckAnswer(req, res, body); err != nil {
		t.Fatal(err)
	}
	if err := key.CheckAnswer(req, res, []byte(`{"requests": [{}]}`)); !errors.Is(err, ErrAnswerNotSigned) {
		t.Error("another body")
	}
	res.StatusCode = 204
	if err := key.CheckAnswer(req, res, body); !errors.Is(err, ErrAnswerNotSigned) {
		t.Error("another status")
	}
	other := signed(t, key, "GET", "http://h/api/v1/requests", "self", selfURL, ci, time.Now())
	res.StatusCode = 200
	if err := key.CheckAnswer(other, res, body); !errors.Is(err, ErrAnswerNotSigned) {
		t.Error("the answer of another call")
	}
}

// FuzzVerify: no header a caller sends makes a verifier panic or take a
// call without the key.
func FuzzVerify(f *testing.F) {
	key, _ := ParseKey(strings.Repeat("k", 40))
	good := signed(f, key, "GET", "http://h/api/v1/requests", "self", selfURL, ci, time.Unix(1_700_000_000, 0))
	f.Add(good.Header.Get(HeaderTarget), good.Header.Get(HeaderTime), good.Header.Get(HeaderNonce), "ci", "admin", "0123")
	f.Fuzz(func(t *testing.T, target, at, nonce, caller, group, sig string) {
		r, _ := http.NewRequest("GET", "http://h/api/v1/requests", nil)
		r.Header.Set(HeaderTarget, target)
		r.Header.Set(HeaderTargetURL, selfURL)
		r.Header.Set(HeaderTime, at)
		r.Header.Set(HeaderNonce, nonce)
		r.Header.Set(HeaderCaller, caller)
		r.Header.Set(HeaderGroup, group)
		r.Header.Set(HeaderSignature, sig)
		if _, err := NewVerifier(key, "self", selfURL).Verify(r, nil, time.Unix(1_700_000_000, 0)); err == nil {
			t.Fatalf("a forged call was taken: %q %q %q %q %q %q", target, at, nonce, caller, group, sig)
		}
	})
}
