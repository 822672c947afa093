// Command retry is a client with a retry policy, to be tested against a
// Doppel that drops half its requests (examples/retry.yaml):
//
//	go run ./cmd/doppel serve --config examples/retry.yaml
//	go run ./examples/retry --url http://127.0.0.1:8080
//
// Each call is POST /pay with an Idempotency-Key of its own, tried at most
// 4 times, 150 ms after the first failure and twice as long after each
// next. It prints each call's key and how many attempts it took; the
// journal then shows whether it kept its word (docs/journal.md).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// policy is the client's retry policy.
type policy struct {
	attempts int           // at most this many tries per call
	backoff  time.Duration // the wait after the first failure, doubled after each
}

// retryable is an answer worth trying again: the backend is unavailable.
func retryable(status int) bool {
	return status == http.StatusServiceUnavailable || status == http.StatusBadGateway || status == http.StatusGatewayTimeout
}

// do sends one call, retrying under the policy with the same key.
func (p policy) do(c *http.Client, url, key string, body []byte) (attempts int, err error) {
	wait := p.backoff
	for attempts = 1; ; attempts++ {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return attempts, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := c.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if !retryable(res.StatusCode) {
				if res.StatusCode >= 300 {
					return attempts, fmt.Errorf("answered %s", res.Status)
				}
				return attempts, nil
			}
			err = errors.New("answered " + res.Status)
		}
		if attempts == p.attempts {
			return attempts, fmt.Errorf("gave up after %d attempts: %w", attempts, err)
		}
		time.Sleep(wait)
		wait *= 2
	}
}

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "where the proxy listens")
	calls := flag.Int("calls", 5, "how many calls to make")
	flag.Parse()
	c := &http.Client{Timeout: 10 * time.Second}
	p := policy{attempts: 4, backoff: 150 * time.Millisecond}
	failed := 0
	for i := 1; i <= *calls; i++ {
		key := fmt.Sprintf("order-%d", i)
		n, err := p.do(c, *url+"/pay", key, []byte(fmt.Sprintf(`{"order": %d, "amount": 100}`, i)))
		if err != nil {
			failed++
			fmt.Printf("%s: %v\n", key, err)
			continue
		}
		fmt.Printf("%s: paid after %d attempts\n", key, n)
	}
	if failed > 0 {
		os.Exit(1)
	}
}
