package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/client"
	"github.com/spf13/cobra"
)

// Environment variables of the admin commands' flags.
const (
	envAdminURL   = "DOPPEL_ADMIN_URL"
	envAdminToken = "DOPPEL_ADMIN_TOKEN"
)

// adminFlags are how a command reaches the admin API: through client/,
// as any Go program would, so that the two cannot drift.
type adminFlags struct {
	url, token, header, output string
	raw                        []byte // the last answer as it came, for -o json
}

func (a *adminFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&a.url, "admin", "", "the admin API's base URL, such as http://127.0.0.1:8081 (env "+envAdminURL+")")
	fs.StringVar(&a.token, "token", "", "an admin token, sent as Bearer <token> (env "+envAdminToken+")")
	fs.StringVar(&a.header, "auth-header", "X-Proxy-Authorization", "the header the token travels in (admin.auth.header)")
	fs.StringVarP(&a.output, "output", "o", "table", "table for people, json for scripts")
}

func (a *adminFlags) resolve(cmd *cobra.Command) error {
	if !cmd.Flags().Changed("admin") {
		a.url = os.Getenv(envAdminURL)
	}
	if !cmd.Flags().Changed("token") {
		a.token = os.Getenv(envAdminToken)
	}
	if a.url == "" {
		return usage("--admin (or %s) is required: the admin API's base URL", envAdminURL)
	}
	if u, err := url.Parse(a.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usage("--admin must be an http or https URL, not %q", a.url)
	}
	if a.output != "table" && a.output != "json" {
		return usage("--output must be table or json, not %q", a.output)
	}
	return nil
}

// callTimeout bounds a call that is not a stream.
const callTimeout = 30 * time.Second

// client is the admin API's client for the flags: each answer read whole
// is kept in a.raw, which -o json prints as it came.
func (a *adminFlags) client() *client.Client {
	return a.newClient(&http.Client{Timeout: callTimeout})
}

// streamClient is client without a timeout: a stream lasts until
// interrupted.
func (a *adminFlags) streamClient() *client.Client {
	return a.newClient(&http.Client{})
}

func (a *adminFlags) newClient(hc *http.Client) *client.Client {
	opts := []client.Option{
		client.WithHTTPClient(hc),
		client.WithTokenHeader(a.header),
		client.WithAnswer(func(ans client.Answer) { a.raw = ans.Body }),
	}
	if a.token != "" {
		opts = append(opts, client.WithToken(a.token))
	}
	return client.New(a.url, opts...)
}

// printRaw writes the last answer as it came.
func (a *adminFlags) printRaw(cmd *cobra.Command) error { return write(cmd, string(a.raw)) }

// failure is what stopped a call, in one line: the error envelope's code
// and message, the status of an answer that is not Doppel's, why the
// admin API could not be reached, or, of an answer that does not decode,
// what it should have been (want: "a list of sessions").
func (a *adminFlags) failure(err error, want string) error {
	var e *client.Error
	var ue *url.Error
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &e) && e.Code != "":
		return failed("%d %s: %s", e.Status, e.Code, e.Message)
	case errors.As(err, &e):
		return failed("the admin API answered %d %s", e.Status, http.StatusText(e.Status))
	case errors.As(err, &ue):
		return failed("the admin API at %s cannot be reached: %v", a.url, ue)
	case want != "" && errors.As(err, &syntax):
		return failed("the admin API's answer is not %s: %v", want, syntax)
	case want != "" && errors.As(err, &typ):
		return failed("the admin API's answer is not %s: %v", want, typ)
	}
	// The client's errors start with "doppel ", which run prints already.
	return failed("%s", strings.TrimPrefix(err.Error(), "doppel "))
}
