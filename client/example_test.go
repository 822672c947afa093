package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/doppelproxy/doppel/client"
	"github.com/doppelproxy/doppel/doppeltest"
)

// serving is a Doppel for the examples, with one mocked proxy.
func serving() *doppeltest.Server {
	s, err := doppeltest.Start(doppeltest.Config{Proxies: []client.Proxy{{
		Name: "shop", URL: "http://127.0.0.1:9",
		Mocks: []client.Mock{{Name: "cart", Request: client.MockRequest{Method: "GET", URL: "^/cart$"},
			Response: client.MockResponse{Status: 200, JSON: `{"items": 2}`}}},
	}}})
	if err != nil {
		panic(err)
	}
	return s
}

func getStatus(url string, header ...string) int {
	req, _ := http.NewRequest("GET", url, nil)
	if len(header) == 2 {
		req.Header.Set(header[0], header[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func ExampleNew() {
	s := serving()
	defer s.Close()
	ctx := context.Background()

	c := client.New(s.AdminURL, client.WithToken(s.Token))
	proxies, err := c.Proxies(ctx)
	if err != nil {
		panic(err)
	}
	for _, p := range proxies {
		fmt.Println(p.Proxy.Name, len(p.Proxy.Mocks), "mock", len(p.Revision), "hex digits of revision")
	}
	// Output: shop 1 mock 16 hex digits of revision
}

// Read, change, write back with the revision read: a concurrent change
// in between is ErrRevisionMismatch, and the loop applies the change again
// to what is there now.
func ExampleClient_UpdateProxy() {
	s := serving()
	defer s.Close()
	ctx := context.Background()

	for {
		p, rev, err := s.Client.Proxy(ctx, "shop")
		if err != nil {
			panic(err)
		}
		p.Latency = &client.Latency{Percentage: 0.5, Min: 0.1, Max: 0.3}
		if _, err := s.Client.UpdateProxy(ctx, p, rev); errors.Is(err, client.ErrRevisionMismatch) {
			continue
		} else if err != nil {
			panic(err)
		}
		break
	}
	p, _, _ := s.Client.Proxy(ctx, "shop")
	fmt.Println(p.Latency.Percentage, p.Latency.Min, p.Latency.Max)
	// Output: 0.5 0.1 0.3
}

func ExampleError() {
	s := serving()
	defer s.Close()

	_, err := s.Client.CreateProxy(context.Background(), client.Proxy{Name: "shop", URL: "http://127.0.0.1:9"})
	var e *client.Error
	if errors.Is(err, client.ErrConflict) && errors.As(err, &e) {
		fmt.Println(e.Status, e.Code)
	}
	// Output: 409 CONFLICT
}

// Check what a client did: how many attempts, how far apart, with one
// Idempotency-Key. A failed check says which condition failed.
func ExampleClient_Verify() {
	s := serving()
	defer s.Close()
	ctx := context.Background()
	for range 2 {
		getStatus(s.ProxyURL+"/cart", "Idempotency-Key", "k-1")
	}

	res, err := s.Client.Verify(ctx, client.Verification{
		Match: client.Match{Proxy: "shop", Path: "^/cart$"}, Count: client.Exactly(2), SameHeader: "Idempotency-Key"})
	fmt.Println(res.Matched, err)

	_, err = s.Client.Verify(ctx, client.Verification{Match: client.Match{Path: "^/cart$"}, Count: client.AtLeast(3)})
	var failed *client.VerificationError
	if errors.As(err, &failed) {
		fmt.Println(failed.Message)
	}
	// Output:
	// 2 <nil>
	// count: 2 requests matched, fewer than the min of 3
}

func ExampleClient_StreamRequests() {
	s := serving()
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	stream, err := s.Client.StreamRequests(ctx, client.Filter{Proxy: "shop"})
	if err != nil {
		panic(err)
	}
	defer stream.Close()
	getStatus(s.ProxyURL + "/cart")
	r, err := stream.Next()
	fmt.Println(r.Method, r.Path, r.Status, r.Mock, err)
	// Output: GET /cart 200 cart <nil>
}

// A session's mocks and faults apply only to requests carrying its id:
// parallel tests share one Doppel.
func ExampleClient_CreateSession() {
	s := serving()
	defer s.Close()
	ctx := context.Background()

	sess, err := s.Client.CreateSession(ctx, client.Session{TTL: 60, Proxies: map[string]client.SessionProxy{
		"shop": {Mocks: []client.Mock{{Name: "down", Request: client.MockRequest{Method: "GET", URL: "^/cart$"},
			Response: client.MockResponse{Status: 503, Body: "down for this test"}}}},
	}})
	if err != nil {
		panic(err)
	}
	defer s.Client.DeleteSession(ctx, sess.ID)
	fmt.Println(getStatus(s.ProxyURL+"/cart", s.SessionHeader, sess.ID), getStatus(s.ProxyURL+"/cart"))
	// Output: 503 200
}

// Turn what a real backend answered into mocks, then test without it.
func ExampleClient_RecordAndApply() {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"sku": "42", "price": {"amount": 1999}}`)
	}))
	s, err := doppeltest.Start(doppeltest.Config{Proxies: []client.Proxy{{Name: "catalog", URL: backend.URL}}})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	ctx := context.Background()

	getStatus(s.ProxyURL + "/items/42") // forwarded, and kept in the journal
	_, rev, _ := s.Client.Proxy(ctx, "catalog")
	p, _, err := s.Client.RecordAndApply(ctx, "catalog", rev, client.Recording{Match: "^/items/"})
	if err != nil {
		panic(err)
	}
	backend.Close()

	resp, err := http.Get(s.ProxyURL + "/items/42")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(p.Mocks[0].Request.Method, p.Mocks[0].Request.URL)
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// GET ^/items/42$
	// 200 {"sku": "42", "price": {"amount": 1999}}
}
