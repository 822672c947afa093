// Package store is where a configuration lives. This file holds how a store
// is chosen: never from the document itself, always from flags and the
// environment (flag beats environment beats default).
package store

import (
	"fmt"
	"net/url"
	"strings"
)

// Kind names a store implementation.
type Kind string

const (
	KindFile     Kind = "file"
	KindPostgres Kind = "postgres"
)

// Environment variables that stand in for the store flags.
const (
	EnvStore       = "DOPPEL_CONFIG_STORE"
	EnvConfigPath  = "DOPPEL_CONFIG_PATH"
	EnvDatabaseURL = "DOPPEL_DATABASE_URL"
	EnvConfigName  = "DOPPEL_CONFIG_NAME"
)

// Defaults for the store flags.
const (
	DefaultConfigPath = "./main.yaml"
	DefaultConfigName = "default"
)

// Options select a store and what to read from it.
type Options struct {
	Kind        Kind
	ConfigPath  string // file store: the YAML document
	DatabaseURL string // postgres store: never logged unmasked (see MaskURL)
	ConfigName  string // postgres store: which configuration
}

// Check refuses combinations that cannot work; its errors are usage errors.
func (o Options) Check() error {
	switch o.Kind {
	case KindFile:
		if o.ConfigPath == "" {
			return fmt.Errorf("--config may not be empty")
		}
	case KindPostgres:
		if o.DatabaseURL == "" {
			return fmt.Errorf("--database-url (or %s) is required with --store postgres", EnvDatabaseURL)
		}
		if o.ConfigName == "" {
			return fmt.Errorf("--config-name (or %s) may not be empty", EnvConfigName)
		}
	default:
		return fmt.Errorf("--store (or %s) must be file or postgres, not %q", EnvStore, o.Kind)
	}
	return nil
}

// MaskURL hides the secrets of a database URL so that it can appear in an
// error or a log line, as Doppel 1.1 does: the password becomes `***`
// (user:***@host), and so does every query parameter whose name mentions
// one (password, sslpassword). A value that is not a hierarchical URL (a
// key=value DSN, `postgres:u:p@h`) is hidden whole.
func MaskURL(raw string) string {
	const hidden = "<database url hidden>"
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return hidden
	}
	// url.UserPassword would escape the mask, so the user part is put back
	// by hand.
	var userinfo string
	if _, has := u.User.Password(); has {
		userinfo = url.User(u.User.Username()).String() + ":" + Masked + "@"
		u.User = nil
	}
	// The query is rewritten by hand: url.Values.Encode would escape the
	// mask and reorder the parameters.
	params := strings.Split(u.RawQuery, "&")
	for i, p := range params {
		key, _, _ := strings.Cut(p, "=")
		if k, err := url.QueryUnescape(key); err == nil && strings.Contains(strings.ToLower(k), "password") {
			params[i] = key + "=" + Masked
		}
	}
	u.RawQuery = strings.Join(params, "&")
	shown := u.String()
	if userinfo != "" {
		shown = strings.Replace(shown, "://", "://"+userinfo, 1)
	}
	return shown
}

// Masked is what stands in a shown URL for a secret it carried.
const Masked = "***"
