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
// error or a log line: the password, and every query parameter whose name
// mentions one (password, sslpassword). A value that is not a hierarchical
// URL (a key=value DSN, `postgres:u:p@h`) is hidden whole.
func MaskURL(raw string) string {
	const hidden = "<database url hidden>"
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return hidden
	}
	q := u.Query()
	for key := range q {
		if strings.Contains(strings.ToLower(key), "password") {
			q.Set(key, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.Redacted()
}
