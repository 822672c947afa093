package client_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/client"
)

// answering is an admin API that answers every call with status and
// body, and keeps the last request's body and Content-Type.
func answering(t *testing.T, status int, body string) (url string, sent func() (string, string)) {
	t.Helper()
	var gotBody, gotType string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody, gotType = string(b), r.Header.Get("Content-Type")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() (string, string) { return gotBody, gotType }
}

// TestWithAnswerSeesTheAnswerAsItCame: the body reaches the hook byte for
// byte, spacing and fields the client does not know included, beside the
// typed value; an error answer reaches it too.
func TestWithAnswerSeesTheAnswerAsItCame(t *testing.T) {
	const list = `{ "sessions": [ {"id": "s1", "ttl": 60, "proxies": ["zeta", "alpha"], "future": 1} ] }` + "\n"
	url, _ := answering(t, 200, list)
	var got []client.Answer
	c := client.New(url, client.WithAnswer(func(a client.Answer) { got = append(got, a) }))
	sessions, err := c.Sessions(ctxFor(t))
	if err != nil || len(sessions) != 1 || sessions[0].ID != "s1" || sessions[0].Proxies[0] != "zeta" {
		t.Fatalf("%+v %v", sessions, err)
	}
	if len(got) != 1 || got[0].Operation != "listSessions" || got[0].Status != 200 || string(got[0].Body) != list {
		t.Errorf("the hook saw %+v", got)
	}

	const refusal = `{"status":"error","message":"no such session","code":"NOT_FOUND"}`
	url, _ = answering(t, 404, refusal)
	got = nil
	c = client.New(url, client.WithAnswer(func(a client.Answer) { got = append(got, a) }))
	if err := c.DeleteSession(ctxFor(t), "gone"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("the refusal: %v", err)
	}
	if len(got) != 1 || got[0].Status != 404 || string(got[0].Body) != refusal {
		t.Errorf("the hook saw %+v", got)
	}
}

// TestDocumentsAreSentAsWritten: a session or a verification written as
// JSON reaches Doppel unchanged, a field the client does not know
// included, for Doppel to judge.
func TestDocumentsAreSentAsWritten(t *testing.T) {
	const session = `{"ttl": 30, "proxies": {"shop": {}}, "typo": true}`
	url, sent := answering(t, 201, `{"id":"s1","expires_at":"2026-01-02T03:04:05.5Z","revision":"r","ttl":30,"proxies":["shop"]}`)
	info, err := client.New(url).CreateSessionJSON(ctxFor(t), []byte(session))
	if err != nil || info.ID != "s1" || info.ExpiresAt.Nanosecond() != 5e8 {
		t.Fatalf("%+v %v", info, err)
	}
	if body, ct := sent(); body != session || ct != "application/json" {
		t.Errorf("sent %q as %q", body, ct)
	}

	const verification = `{"match": {"path": "^/pay$"}, "count": {"max": 4}, "extra": []}`
	url, sent = answering(t, 200, `{"matched":2,"gaps_ms":[101.5],"replicas":{"answered":["a"],"missing":[]}}`)
	got, err := client.New(url).VerifyJSON(ctxFor(t), []byte(verification))
	if err != nil || got.Matched != 2 || got.GapsMS[0] != 101.5 || got.Replicas.Answered[0] != "a" {
		t.Fatalf("%+v %v", got, err)
	}
	if body, ct := sent(); body != verification || ct != "application/json" {
		t.Errorf("sent %q as %q", body, ct)
	}
}

// TestAFailedVerificationSaysWhoseJournals: the 409 carries the replicas
// read, and whether some were missing, as a verification that held does.
func TestAFailedVerificationSaysWhoseJournals(t *testing.T) {
	url, _ := answering(t, 409, `{"status":"error","code":"VERIFICATION_FAILED","message":"3 requests matched, want at most 2",
		"matched":3,"gaps_ms":[1,2],"requests":[{"id":"r1","proxy":"shop","fault":{"abort":"body","hang":true}}],"requests_omitted":2,
		"replicas":{"answered":["zeta","alpha"],"missing":[{"id":"beta","url":"http://b","state":"lost","error":"no heartbeat"}]},"partial":true}`)
	_, err := client.New(url).VerifyJSON(ctxFor(t), []byte(`{}`))
	var v *client.VerificationError
	if !errors.As(err, &v) || !errors.Is(err, client.ErrVerificationFailed) {
		t.Fatalf("%v", err)
	}
	if v.Matched != 3 || v.RequestsOmitted != 2 || len(v.Requests) != 1 || v.Requests[0].Fault.Abort != "body" || !v.Requests[0].Fault.Hang {
		t.Errorf("%+v", v)
	}
	if !v.Partial || len(v.Replicas.Answered) != 2 || v.Replicas.Answered[0] != "zeta" || len(v.Replicas.Missing) != 1 || v.Replicas.Missing[0].ID != "beta" {
		t.Errorf("replicas %+v, partial %v", v.Replicas, v.Partial)
	}
}

// TestNextEventYieldsEveryEvent: the note opening a stream, a fleet's
// replicas, entries, what was dropped and a kind this client does not
// know come in order, each with its data as it came; Next skips to the
// entries.
func TestNextEventYieldsEveryEvent(t *testing.T) {
	const stream = ": the journal's entries follow\n\n" +
		"event: replicas\ndata: {\"answered\":[\"zeta\",\"alpha\"],\"missing\":[]}\n\n" +
		"event: request\ndata: {\"id\":\"r1\",\"status\":null,\"replica\":\"zeta\"}\n\n" +
		"event: dropped\ndata: {\"dropped\":7}\n\n" +
		"event: later\ndata: {\"x\":1}\n\n" +
		": keep-alive\n\n" +
		"event: request\ndata: {\"id\":\"r2\",\"status\":200}\n\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, stream)
	}))
	defer srv.Close()
	c := client.New(srv.URL)

	s, err := c.StreamRequests(ctxFor(t), client.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var kinds, data []string
	for {
		ev, err := s.NextEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds, data = append(kinds, ev.Kind), append(data, string(ev.Data))
		switch ev.Kind {
		case client.EventReplicas:
			if ev.Replicas.Answered[0] != "zeta" {
				t.Errorf("replicas %+v", ev.Replicas)
			}
		case client.EventRequest:
			if ev.Request.ID == "r1" && (ev.Request.Replica != "zeta" || ev.Request.Status != 0) {
				t.Errorf("entry %+v", ev.Request)
			}
		case client.EventDropped:
			if ev.Dropped != 7 {
				t.Errorf("dropped %d", ev.Dropped)
			}
		}
	}
	if got := strings.Join(kinds, ","); got != ",replicas,request,dropped,later,,request" {
		t.Errorf("kinds %q", got)
	}
	if data[3] != `{"dropped":7}` || data[4] != `{"x":1}` || data[0] != "" {
		t.Errorf("data %q", data)
	}
	if s.Dropped() != 7 || len(s.Replicas().Answered) != 2 {
		t.Errorf("dropped %d, replicas %+v", s.Dropped(), s.Replicas())
	}

	s2, err := c.StreamRequests(ctxFor(t), client.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for _, want := range []string{"r1", "r2"} {
		if r, err := s2.Next(); err != nil || r.ID != want {
			t.Errorf("Next: %q %v, want %s", r.ID, err, want)
		}
	}
	if _, err := s2.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last: %v", err)
	}
}

// TestApplyRecordingSaysWhatItFound: the proxy with its new revision,
// and how many exchanges, the message and whose journals; nothing to
// record is the preview's shape with no revision.
func TestApplyRecordingSaysWhatItFound(t *testing.T) {
	url, sent := answering(t, 200, `{"revision":"r2","proxy":{"name":"shop","type":"http","url":"http://127.0.0.1:9/",
		"mocks":[{"name":"rec-get-a","request":{"method":"GET","url":"^/a$"},"response":{"status":200,"body":"a"}}]},
		"mocks":[{"name":"rec-get-a","request":{"method":"GET","url":"^/a$"},"response":{"status":200,"body":"a"}}],
		"exchanges":3,"message":"a note","replicas":{"answered":["one"],"missing":[]}}`)
	out, err := client.New(url).ApplyRecording(ctxFor(t), "shop", "r1", client.Recording{Match: "^/a"})
	if err != nil || out.Revision != "r2" || out.Proxy.Name != "shop" || len(out.Proxy.Mocks) != 1 ||
		out.Exchanges != 3 || out.Message != "a note" || out.Replicas.Answered[0] != "one" {
		t.Fatalf("%+v %v", out, err)
	}
	if body, _ := sent(); !strings.Contains(body, `"revision":"r1"`) || !strings.Contains(body, `"apply":true`) || !strings.Contains(body, `"match":"^/a"`) {
		t.Errorf("sent %s", body)
	}

	url, _ = answering(t, 200, `{"mocks":[],"exchanges":0,"message":"nothing matched","replicas":{"answered":["one"],"missing":[]}}`)
	out, err = client.New(url).ApplyRecording(ctxFor(t), "shop", "r1", client.Recording{})
	if err != nil || out.Revision != "" || out.Message != "nothing matched" {
		t.Errorf("%+v %v", out, err)
	}
}
