package telemetry

import (
	"strings"
	"testing"
)

func TestSentryDSN(t *testing.T) {
	t.Setenv(EnvSentryDSN, "")
	if dsn, src := SentryDSN(""); dsn != "" || src != "" {
		t.Fatal("no DSN anywhere is off")
	}
	if dsn, src := SentryDSN("https://k@s.example/1"); dsn != "https://k@s.example/1" || src != "sentry.dsn" {
		t.Fatal(src)
	}
	t.Setenv(EnvSentryDSN, "https://e@s.example/2")
	if dsn, src := SentryDSN("https://k@s.example/1"); dsn != "https://e@s.example/2" || src != EnvSentryDSN {
		t.Fatal("the environment does not win")
	}
	t.Setenv(EnvSentryDSN, "   ")
	if _, src := SentryDSN("https://k@s.example/1"); src != "sentry.dsn" {
		t.Fatal("an empty environment value counts as set")
	}
}

func TestMalformedDSNIsMasked(t *testing.T) {
	for _, dsn := range []string{"https://secretkey@sentry.example.com", "not a dsn secretkey", "ftp://secretkey@h/1"} {
		_, err := NewReporter(dsn, "v")
		if err == nil || strings.Contains(err.Error(), "secretkey") {
			t.Errorf("%q: %v", dsn, err)
		}
	}
	r, err := NewReporter("https://secretkey@sentry.example.com/42", "v")
	if err != nil || !r.Enabled() {
		t.Fatalf("a valid DSN: %v", err)
	}
	for dsn, want := range map[string]string{
		"https://secretkey@sentry.example.com/42":        "https://***@sentry.example.com/42",
		"https://secretkey:secret@sentry.example.com/42": "https://***:***@sentry.example.com/42",
		"https://sentry.example.com/42":                  "https://sentry.example.com/42",
		"not a dsn, but it might be a secretkey":         "<redacted>",
	} {
		if m := MaskDSN(dsn); m != want {
			t.Errorf("MaskDSN(%q) = %q, want %q", dsn, m, want)
		}
	}
	off, _ := NewReporter("", "v")
	off.Report(nil) // reports nothing, and does not fail
}
