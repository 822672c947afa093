// Package version holds the one version string Doppel reports everywhere:
// `doppel version`, the doppel_version template variable and the
// doppel_build_info metric. A release build overrides it with
//
//	go build -ldflags "-X github.com/doppelproxy/doppel/internal/version.Version=1.2.3" ./cmd/doppel
package version

// Version is a semantic version, set in code so that a plain `go build`
// reports a real one.
var Version = "0.1.0"
