// Package toxiproxy stands in for Toxiproxy's server package when its own
// tests run against Doppel (make test-toxiproxy, test/toxiproxy). Every
// call the tests make in process — a server, a proxy started, stopped or
// updated, a toxic added or removed — is made on a running Doppel through
// Toxiproxy's HTTP API instead, so the tests' assertions read what Doppel
// did. Its exported names and shapes are those of Toxiproxy's package.
//
// It is Go 1.17, the language of Toxiproxy 2.5.0's go.mod.
package toxiproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// doppelURL is Doppel's Toxiproxy API, where the harness started it.
var doppelURL = func() string {
	if u := os.Getenv("DOPPEL_TOXIPROXY_URL"); u != "" {
		return strings.TrimSuffix(u, "/")
	}
	return "http://127.0.0.1:8475"
}()

var web = &http.Client{Timeout: 30 * time.Second}

// ApiError is an error answer of the API: Toxiproxy's body, {"error",
// "status"}, and its Error text, the message alone.
type ApiError struct {
	Message    string `json:"error"`
	StatusCode int    `json:"status"`
}

func (e *ApiError) Error() string { return e.Message }

// call sends body (JSON unless it is a []byte, none when nil) to Doppel,
// and decodes the answer into out when it has status want; any other
// answer is the ApiError it carries.
func call(method, path string, body interface{}, want int, out interface{}) error {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return err
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, doppelURL+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := web.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		e := &ApiError{}
		if json.Unmarshal(data, e) != nil || e.Message == "" {
			e.Message = fmt.Sprintf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(data))
		}
		e.StatusCode = resp.StatusCode
		return e
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	return json.Unmarshal(data, out)
}

// note says what a call whose error the tests cannot see met: printed,
// it lands in the output of the test that made it.
func note(format string, args ...interface{}) {
	fmt.Printf("doppel shim: "+format+"\n", args...)
}
