package telemetry

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// The variables that override logging.level, in the order they win:
// Doppel's own, then the one Doppel 1.1 reads.
const (
	EnvLog     = "DOPPEL_LOG"
	EnvRustLog = "RUST_LOG"
)

// EnvLevel is the level in force: DOPPEL_LOG's (a level: trace, debug,
// info, warn, error or off), else RUST_LOG's (a filter, ParseFilter),
// else the configured one; a blank variable is as if unset. A value that
// does not parse is an error naming its variable.
func EnvLevel(configured string) (slog.Level, error) {
	if v := strings.TrimSpace(os.Getenv(EnvLog)); v != "" {
		if strings.EqualFold(v, "off") {
			return LevelOff, nil
		}
		l, ok := ParseLevel(v)
		if !ok {
			return 0, fmt.Errorf("%s: %q is not a level (trace, debug, info, warn, error, off)", EnvLog, v)
		}
		return l, nil
	}
	if v := os.Getenv(EnvRustLog); strings.TrimSpace(v) != "" {
		l, err := ParseFilter(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", EnvRustLog, err)
		}
		return l, nil
	}
	l, _ := ParseLevel(configured)
	return l, nil
}

// maxFilter bounds a filter: an environment variable, but one that may
// come from anywhere.
const maxFilter = 64 << 10

// ParseFilter reads a filter as Rust's tracing does (RUST_LOG): a level,
// or directives target=level, comma-separated; a directive's target may
// carry a span filter ([span{field=value}]), and a target without a level
// is at trace. Doppel logs at one level, so what counts is the most
// verbose level of the directives that reach it: those without a target
// and those whose target starts with doppel. When none does, nothing is
// logged, as tracing logs nothing no directive enables.
func ParseFilter(s string) (slog.Level, error) {
	if len(s) > maxFilter {
		return 0, fmt.Errorf("the filter is %d bytes; at most %d are read", len(s), maxFilter)
	}
	level, counted := LevelOff, false
	for d := range strings.SplitSeq(s, ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		target, l, err := parseDirective(d)
		if err != nil {
			return 0, err
		}
		if target != "" && !strings.HasPrefix(target, "doppel") {
			continue // another's target, or a span filter alone ("[")
		}
		if !counted || l < level {
			level, counted = l, true
		}
	}
	return level, nil
}

// parseDirective reads [target][span][=level], or a level alone. A span
// filter only narrows where a target's level applies, so the target and
// the level are what it yields; a span filter without a target yields the
// target "[", which is no one's.
func parseDirective(d string) (target string, level slog.Level, err error) {
	if l, ok := filterLevel(d); ok {
		return "", l, nil
	}
	rest, parts := d, 0
	for parts < 2 && rest != "" && rest[0] != '=' {
		if rest[0] == '[' {
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return "", 0, fmt.Errorf("the directive %q opens a span filter with [ and never closes it", d)
			}
			rest = rest[end+1:]
		} else {
			n := 0
			for n < len(rest) && targetByte(rest[n]) {
				n++
			}
			if n == 0 {
				break
			}
			if target == "" {
				target = rest[:n]
			}
			rest = rest[n:]
		}
		parts++
	}
	if target == "" && parts > 0 {
		target = "["
	}
	switch {
	case parts == 0:
		return "", 0, fmt.Errorf("the directive %q is neither a level (trace, debug, info, warn, error, off) nor target=level", d)
	case rest == "":
		return target, LevelTrace, nil
	case rest[0] != '=':
		return "", 0, fmt.Errorf("the directive %q is neither a level (trace, debug, info, warn, error, off) nor target=level", d)
	case rest == "=":
		return target, LevelTrace, nil
	}
	l, ok := filterLevel(rest[1:])
	if !ok {
		return "", 0, fmt.Errorf("the directive %q sets %q, which is not a level (trace, debug, info, warn, error, off)", d, rest[1:])
	}
	return target, l, nil
}

// targetByte says whether c may be part of a target: a word character or
// a colon or a dash, as in tracing's module paths, and a slash or a dot,
// as in the Go package paths Doppel's targets are.
func targetByte(c byte) bool {
	return c == '_' || c == ':' || c == '-' || c == '/' || c == '.' ||
		'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// filterLevel reads a level as tracing's filters name them: a name in
// any case, or 0 (off) to 5 (trace).
func filterLevel(s string) (slog.Level, bool) {
	switch strings.ToLower(s) {
	case "off", "0":
		return LevelOff, true
	case "error", "1":
		return slog.LevelError, true
	case "warn", "2":
		return slog.LevelWarn, true
	case "info", "3":
		return slog.LevelInfo, true
	case "debug", "4":
		return slog.LevelDebug, true
	case "trace", "5":
		return LevelTrace, true
	}
	return 0, false
}
