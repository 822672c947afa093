package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStreamsAreCounted: 16 streams per caller and 256 in all; one that
// ends frees its place.
func TestStreamsAreCounted(t *testing.T) {
	st := newStreams()
	var closes []func()
	for range maxStreamsPerCaller {
		c, refusal := st.open("token root")
		if refusal != "" {
			t.Fatal(refusal)
		}
		closes = append(closes, c)
	}
	if _, refusal := st.open("token root"); refusal != "token root has 16 streams of the journal open, the most one caller may; close one first" {
		t.Errorf("the 17th: %q", refusal)
	}
	closes[0]()
	if _, refusal := st.open("token root"); refusal != "" {
		t.Errorf("after one ended: %q", refusal)
	}
	for i := 1; st.all < maxStreams; i++ {
		for range maxStreamsPerCaller {
			if st.all == maxStreams {
				break
			}
			if _, refusal := st.open(fmt.Sprint("client 10.0.0.", i)); refusal != "" {
				t.Fatal(refusal)
			}
		}
	}
	if _, refusal := st.open("token reader"); refusal != "256 streams of the journal are open, the most Doppel serves at once; close one first" {
		t.Errorf("the 257th: %q", refusal)
	}
}

// openedWriter tells when the stream's answer began.
type openedWriter struct {
	*httptest.ResponseRecorder
	began chan int
	once  sync.Once
}

func (w *openedWriter) WriteHeader(code int) {
	w.once.Do(func() { w.began <- code })
	w.ResponseRecorder.WriteHeader(code)
}

// TestAStreamCountsAgainstItsToken: the 17th stream of one token is
// refused, naming it, while another token's opens; a stream that ended
// is no longer counted.
func TestAStreamCountsAgainstItsToken(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	api := New(e.ctl, nil, nil, e.jr)
	stream := func(token string) (int, context.CancelFunc, chan struct{}) {
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, "GET", "/api/v1/requests/stream", nil)
		req.Header.Set("X-Proxy-Authorization", "Bearer "+token)
		w := &openedWriter{ResponseRecorder: httptest.NewRecorder(), began: make(chan int, 1)}
		ended := make(chan struct{})
		go func() { defer close(ended); api.ServeHTTP(w, req) }()
		select {
		case code := <-w.began:
			return code, cancel, ended
		case <-time.After(20 * time.Second):
			t.Fatal("the stream did not answer")
		}
		return 0, cancel, ended
	}
	var cancels []context.CancelFunc
	var ends []chan struct{}
	for range maxStreamsPerCaller {
		code, cancel, ended := stream(adminToken)
		if code != 200 {
			t.Fatalf("a stream of root: %d", code)
		}
		cancels, ends = append(cancels, cancel), append(ends, ended)
	}
	req := httptest.NewRequest("GET", "/api/v1/requests/stream", nil)
	req.Header.Set("X-Proxy-Authorization", "Bearer "+adminToken)
	w := httptest.NewRecorder()
	api.ServeHTTP(w, req)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"code":"TOO_MANY_SUBSCRIBERS"`) ||
		!strings.Contains(w.Body.String(), "token root has 16 streams of the journal open") {
		t.Errorf("the 17th of root: %d %s", w.Code, w.Body)
	}
	code, cancel, ended := stream(userToken)
	if code != 200 {
		t.Errorf("reader's first stream: %d", code)
	}
	cancel()
	<-ended
	cancels[0]()
	<-ends[0]
	api.streams.mu.Lock()
	open, reader := api.streams.all, api.streams.of["token reader"]
	api.streams.mu.Unlock()
	if open != maxStreamsPerCaller-1 || reader != 0 {
		t.Errorf("after two ended: %d open, reader %d", open, reader)
	}
	if code, cancel, _ := stream(adminToken); code != 200 {
		t.Errorf("root after one of its streams ended: %d", code)
	} else {
		cancel()
	}
	for _, c := range cancels[1:] {
		c()
	}
}
