// Command sessions is two test suites run at once against one Doppel
// (examples/sessions.yaml), each with a session of its own, created
// before its tests and ended after them, as a test fixture would:
//
//	go run ./cmd/doppel serve --config examples/sessions.yaml
//	go run ./examples/sessions --proxy http://127.0.0.1:8080 --admin http://127.0.0.1:8081
//
// The "outage" suite makes the catalog answer 503; the "happy" suite
// meets the catalog as configured. Neither sees the other's faults. It
// prints what each suite's requests got, and exits 1 if a suite saw
// anything else than its own.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
)

// token is the example's admin token (examples/sessions.yaml): never use
// a published one.
const token = "sessions-example-token-0123456789ab"

// fixture is a session for one suite: begin creates it, end ends it.
type fixture struct {
	admin string
	id    string
}

// begin creates a session laying overlay over the proxies it names.
func begin(admin string, overlay map[string]any) (*fixture, error) {
	body, _ := json.Marshal(map[string]any{"ttl": 60, "proxies": overlay})
	res, err := call(http.MethodPost, admin+"/api/v1/sessions", body)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("creating a session: %s %s", res.Status, raw)
	}
	var s struct{ ID string }
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return &fixture{admin: admin, id: s.ID}, nil
}

// end ends the session.
func (f *fixture) end() error {
	res, err := call(http.MethodDelete, f.admin+"/api/v1/sessions/"+f.id, nil)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		return errors.New("ending the session: " + res.Status)
	}
	return nil
}

// get is a request of the suite's: it carries the session's id.
func (f *fixture) get(url string) (int, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-Doppel-Session", f.id)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

func call(method, url string, body []byte) (*http.Response, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Proxy-Authorization", "Bearer "+token)
	return http.DefaultClient.Do(req)
}

// suite runs one suite's tests inside its session.
func suite(name, proxy, admin string, overlay map[string]any, want int) error {
	f, err := begin(admin, overlay)
	if err != nil {
		return err
	}
	defer f.end()
	for i := range 5 {
		got, err := f.get(proxy + "/catalog")
		if err != nil {
			return err
		}
		fmt.Printf("%s: request %d got %d\n", name, i+1, got)
		if got != want {
			return fmt.Errorf("%s: request %d got %d, want %d", name, i+1, got, want)
		}
	}
	return nil
}

func main() {
	proxy := flag.String("proxy", "http://127.0.0.1:8080", "Doppel's proxy listener")
	admin := flag.String("admin", "http://127.0.0.1:8081", "Doppel's admin API")
	flag.Parse()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() {
		errs[0] = suite("outage", *proxy, *admin, map[string]any{"shop": map[string]any{
			"mocks": []any{map[string]any{"name": "down", "request": map[string]any{"method": "GET", "url": "^/catalog$"},
				"response": map[string]any{"status": 503, "body": "down for this suite"}}},
		}}, http.StatusServiceUnavailable)
	})
	wg.Go(func() {
		errs[1] = suite("happy", *proxy, *admin, map[string]any{"shop": map[string]any{
			"latency": map[string]any{"percentage": 0, "min": 0, "max": 0},
		}}, http.StatusOK)
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
