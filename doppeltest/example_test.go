package doppeltest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/client"
	"github.com/doppelproxy/doppel/doppeltest"
)

// getWithRetries is the client under test: a GET retried on 5xx, three
// attempts, with a backoff.
func getWithRetries(c *http.Client, url string, attempts int) (*http.Response, error) {
	for i := 1; ; i++ {
		resp, err := c.Get(url)
		if err == nil && (resp.StatusCode < 500 || i == attempts) {
			return resp, nil
		}
		if err == nil {
			resp.Body.Close()
		} else if i == attempts {
			return nil, err
		}
		time.Sleep(time.Duration(i) * 20 * time.Millisecond)
	}
}

// The test the README shows, as it is there (TestTheReadmeShowsThisTest
// holds them equal): a client that retries a 503 gets its answer, and the
// journal shows three attempts with a backoff between them.
func TestCartSurvivesTwo503s(t *testing.T) {
	s := doppeltest.New(t, doppeltest.Config{YAML: `
proxies:
- name: shop
  type: http
  url: http://127.0.0.1:9 # no backend: the mock answers
  mocks: [{name: cart, request: {method: GET, url: ^/cart$}, response: {status: 200, json: '{"items": 2}'},
    proxy: {loss: {percentage: 1, status: 503, when: {count: {first: 2}}}}}]`})
	if resp, err := getWithRetries(http.DefaultClient, s.ProxyURL+"/cart", 3); err != nil || resp.StatusCode != 200 {
		t.Fatalf("got %v, %v; want 200 after two retries", resp, err)
	}
	s.Verify(t, client.Verification{Match: client.Match{Path: "^/cart$"}, Count: client.Exactly(3), GapsMS: client.AtLeast(15)})
}

// A client that retries a 503 twice gets the answer, and the journal shows
// the three attempts with the client's backoff between them.
func Example() {
	s, err := doppeltest.Start(doppeltest.Config{Proxies: []client.Proxy{{
		Name: "shop",
		URL:  "http://127.0.0.1:9", // no backend: the mock answers
		Mocks: []client.Mock{{
			Name:     "cart",
			Request:  client.MockRequest{Method: "GET", URL: "^/cart$"},
			Response: client.MockResponse{Status: 200, JSON: `{"items": 2}`},
			Proxy: &client.MockOverride{Loss: &client.Loss{Percentage: 1, Status: 503,
				When: &client.When{Count: &client.Count{First: client.Ptr[int64](2)}}}},
		}},
	}}})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	resp, err := getWithRetries(http.DefaultClient, s.ProxyURL+"/cart", 3)
	if err != nil {
		panic(err)
	}
	res, err := s.Client.Verify(context.Background(), client.Verification{
		Match: client.Match{Proxy: "shop", Path: "^/cart$"}, Count: client.Exactly(3), GapsMS: client.AtLeast(15)})
	fmt.Println(resp.StatusCode, "after", res.Matched, "attempts", err)
	// Output: 200 after 3 attempts <nil>
}
