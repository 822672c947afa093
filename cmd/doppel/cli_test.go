package main

// These tests run the real doppel binary as a subprocess and check the
// command-line contract of SPEC §10.1, §12 and §16 ("Command line"): exit
// codes (0 ok, 1 rejected/failed, 2 usage), what goes to stdout and what to
// stderr, and how flags, the environment and defaults combine.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/version"
)

// doppelBin is the binary TestMain builds once for every test.
var doppelBin string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

// buildAndRun builds the binary into a temporary directory, runs the tests
// and removes the directory; it is separate from TestMain so that the
// deferred clean-up runs before os.Exit.
func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "doppel-cli-test-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "cli_test: creating a temp dir: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)

	name := "doppel"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	doppelBin = filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", doppelBin, "./")
	build.Stdout = os.Stderr
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "cli_test: go build failed: %v\n", err)
		return 1
	}
	return m.Run()
}

// Exit codes of the contract, spelled out rather than taken from main.go so
// that a change there cannot silently change what the tests expect.
const (
	wantOK       = 0
	wantRejected = 1
	wantUsage    = 2
)

// result is what one run of the binary produced.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// invocation describes one run of the binary.
type invocation struct {
	args []string
	// env is added to the host environment, from which every DOPPEL_*
	// variable has been removed first.
	env map[string]string
	// dir is the working directory; a fresh t.TempDir() when empty.
	dir string
}

// cleanEnv is os.Environ() without any DOPPEL_* variable, so that nothing
// set on the host can leak into a test.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		key, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(strings.ToUpper(key), "DOPPEL_") || key == "RUST_LOG" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// doppel runs the binary and returns its stdout, stderr and exit code.
func doppel(t *testing.T, inv invocation) result {
	t.Helper()
	dir := inv.dir
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	cmd := exec.CommandContext(ctx, doppelBin, inv.args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	for k, v := range inv.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr

	err := cmd.Run()
	code := 0
	if err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			t.Fatalf("running doppel %q: %v", inv.args, err)
		}
		code = exitErr.ExitCode()
		if code < 0 {
			t.Fatalf("doppel %q did not exit normally: %v", inv.args, err)
		}
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// writeFile writes content to dir/name and returns the file's path.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// repoPath is a path relative to the repository root, made absolute (the
// tests run the binary from elsewhere).
func repoPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// validDoc is a small valid configuration.
const validDoc = `server:
  host: 127.0.0.1
  port: 8080
admin:
  host: 127.0.0.1
  port: 8081
proxies:
  - name: backend
    type: http
    url: http://127.0.0.1:9000
`

// invalidDoc breaks three cross-field rules at once: the listeners share a
// port (V1), a latency block has min > max (V14) and two proxies share a
// name (V6). Each is reported on its own line, path first.
const invalidDoc = `server:
  host: 127.0.0.1
  port: 8080
admin:
  host: 127.0.0.1
  port: 8080
proxies:
  - name: one
    type: http
    url: http://127.0.0.1:9000
    latency:
      percentage: 0.5
      min: 2
      max: 1
  - name: one
    type: http
    url: http://127.0.0.1:9001
    resolve:
      type: header
      header: X-Backend
`

// invalidDocLines match, in document order, the violations of invalidDoc:
// the path first with nothing before it, then the message, optionally
// followed by the source line.
// mintedID is the form of a request id Doppel mints: 1.1's, 32 lowercase
// hex digits (SPEC §19.4).
var mintedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

var invalidDocLines = []*regexp.Regexp{
	regexp.MustCompile(`^admin\.port: \S.*$`),
	regexp.MustCompile(`^proxies\[0\]\.latency\.min: proxy .[a-z]+.: min must be <= max: min is [0-9.]+ s, max is [0-9.]+ s( \(line \d+\))?$`),
	regexp.MustCompile(`^proxies\[1\]\.name: \S.*$`),
}

const validOutput = "configuration is valid\n"

// checkViolations asserts that r is invalidDoc's rejection: exit 1, one
// violation per line on stdout and nothing on stderr.
func checkViolations(t *testing.T, r result) {
	t.Helper()
	if r.code != wantRejected {
		t.Fatalf("want exit %d, got:\n%s", wantRejected, r)
	}
	if r.stderr != "" {
		t.Errorf("stderr must be empty for a rejected document, got:\n%s", r)
	}
	if !strings.HasSuffix(r.stdout, "\n") {
		t.Fatalf("stdout must end with a newline, got:\n%s", r)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != len(invalidDocLines) {
		t.Fatalf("want %d violation lines, got %d:\n%s", len(invalidDocLines), len(lines), r)
	}
	for i, re := range invalidDocLines {
		if !re.MatchString(lines[i]) {
			t.Errorf("violation line %d = %q, want a match for %s", i, lines[i], re)
		}
	}
}

// checkUsage asserts a usage error: exit 2, nothing on stdout, the usage on
// stderr.
func checkUsage(t *testing.T, r result) {
	t.Helper()
	if r.code != wantUsage {
		t.Fatalf("want exit %d (usage), got:\n%s", wantUsage, r)
	}
	if r.stdout != "" {
		t.Errorf("stdout must be empty on a usage error, got:\n%s", r)
	}
	if !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("stderr must carry the usage, got:\n%s", r)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		// stderr must also contain this.
		mention string
	}{
		{name: "no arguments", args: nil},
		{name: "unknown subcommand", args: []string{"bogus"}, mention: "bogus"},
		{name: "unknown config subcommand", args: []string{"config", "bogus"}, mention: "bogus"},
		{name: "unknown root flag", args: []string{"--bogus"}, mention: "--bogus"},
		{name: "unknown validate flag", args: []string{"config", "validate", "--bogus"}, mention: "--bogus"},
		{name: "config alone", args: []string{"config"}},
		{name: "flag without its value", args: []string{"config", "validate", "--store"}, mention: "--store"},
		{name: "empty --config", args: []string{"config", "validate", "--config="}, mention: "--config"},
		{name: "version with an argument", args: []string{"version", "extra"}},
		{name: "schema with an argument", args: []string{"config", "schema", "extra"}},
		{name: "validate with an argument", args: []string{"config", "validate", "extra"}},
		{name: "schema takes no store flags", args: []string{"config", "schema", "--config", "x.yaml"}, mention: "--config"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A valid ./main.yaml is there, so a command that wrongly
			// accepted its arguments would succeed instead.
			dir := t.TempDir()
			writeFile(t, dir, "main.yaml", validDoc)
			r := doppel(t, invocation{args: tc.args, dir: dir})
			checkUsage(t, r)
			if tc.mention != "" && !strings.Contains(r.stderr, tc.mention) {
				t.Errorf("stderr must mention %q, got:\n%s", tc.mention, r)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := doppel(t, invocation{args: []string{"version"}})
	if r.code != wantOK {
		t.Fatalf("want exit 0, got:\n%s", r)
	}
	if r.stderr != "" {
		t.Errorf("stderr must be empty, got:\n%s", r)
	}
	if want := "doppel " + version.Version + "\n"; r.stdout != want {
		t.Errorf("stdout = %q, want %q", r.stdout, want)
	}
	semver := regexp.MustCompile(`^doppel \d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?\n$`)
	if !semver.MatchString(r.stdout) {
		t.Errorf("stdout = %q, want %s", r.stdout, semver)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	example := repoPath(t, "examples/main.yaml")

	t.Run("the checked-in example is valid", func(t *testing.T) {
		t.Parallel()
		r := doppel(t, invocation{args: []string{"config", "validate", "--config", example}})
		if r.code != wantOK || r.stdout != validOutput || r.stderr != "" {
			t.Fatalf("want exit 0, stdout %q and an empty stderr, got:\n%s", validOutput, r)
		}
	})

	t.Run("every violation, one per line with its path", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		bad := writeFile(t, dir, "bad.yaml", invalidDoc)
		checkViolations(t, doppel(t, invocation{args: []string{"config", "validate", "--config", bad}}))
	})

	t.Run("YAML syntax error goes to stdout with its line", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		bad := writeFile(t, dir, "syntax.yaml", "server:\n  host: [\n")
		r := doppel(t, invocation{args: []string{"config", "validate", "--config", bad}})
		if r.code != wantRejected {
			t.Fatalf("want exit 1, got:\n%s", r)
		}
		if r.stderr != "" {
			t.Errorf("stderr must be empty: a parse error is about the document, got:\n%s", r)
		}
		if !regexp.MustCompile(`^[^\n]*\S[^\n]* \(line 2\)\n$`).MatchString(r.stdout) {
			t.Errorf("stdout must be one message ending in \"(line 2)\", got:\n%s", r)
		}
	})

	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		missing := filepath.Join(t.TempDir(), "missing.yaml")
		r := doppel(t, invocation{args: []string{"config", "validate", "--config", missing}})
		checkCannotRead(t, r, missing)
	})

	t.Run("file is a directory", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "dir.yaml")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		r := doppel(t, invocation{args: []string{"config", "validate", "--config", dir}})
		checkCannotRead(t, r, dir)
	})

	t.Run("file without read permission", func(t *testing.T) {
		t.Parallel()
		if runtime.GOOS == "windows" || os.Geteuid() == 0 {
			t.Skip("file permissions do not stop this user from reading")
		}
		path := writeFile(t, t.TempDir(), "locked.yaml", validDoc)
		if err := os.Chmod(path, 0); err != nil {
			t.Fatal(err)
		}
		r := doppel(t, invocation{args: []string{"config", "validate", "--config", path}})
		checkCannotRead(t, r, path)
	})
}

// checkCannotRead asserts that what stopped validate from looking is on
// stderr (naming the file) with exit 1, and that stdout stays empty.
func checkCannotRead(t *testing.T, r result, path string) {
	t.Helper()
	if r.code != wantRejected {
		t.Fatalf("want exit 1, got:\n%s", r)
	}
	if r.stdout != "" {
		t.Errorf("stdout must stay empty when the file cannot be read, got:\n%s", r)
	}
	if !strings.Contains(r.stderr, path) {
		t.Errorf("stderr must give the reason, naming %s, got:\n%s", path, r)
	}
	if strings.Contains(r.stderr, "Usage:") {
		t.Errorf("an unreadable file is not a usage error, got:\n%s", r)
	}
}

// TestConfigPathPrecedence checks flag > DOPPEL_CONFIG_PATH > ./main.yaml.
func TestConfigPathPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// mainYAML is written to ./main.yaml in the working directory
		// unless empty.
		mainYAML string
		// files are written to a separate directory; "{name}" in flag
		// and env values is replaced by the file's absolute path.
		files map[string]string
		flag  string // --config value, unless empty
		env   *string
		want  func(*testing.T, result)
	}{
		{
			name: "default ./main.yaml is read",
			// An invalid document proves it was read, not just found.
			mainYAML: invalidDoc,
			want:     checkViolations,
		},
		{
			name:     "default ./main.yaml, valid",
			mainYAML: validDoc,
			want:     wantValid,
		},
		{
			name: "default ./main.yaml missing",
			want: func(t *testing.T, r result) { checkCannotRead(t, r, "main.yaml") },
		},
		{
			name:     "environment beats the default",
			mainYAML: invalidDoc,
			files:    map[string]string{"good": validDoc},
			env:      ptr("{good}"),
			want:     wantValid,
		},
		{
			name:  "environment alone, no ./main.yaml",
			files: map[string]string{"good": validDoc},
			env:   ptr("{good}"),
			want:  wantValid,
		},
		{
			// The environment names a missing file: no fallback to the default.
			name:     "environment naming a missing file",
			mainYAML: invalidDoc,
			env:      ptr("other.yaml"),
			want: func(t *testing.T, r result) {
				checkCannotRead(t, r, "other.yaml")
			},
		},
		{
			name:     "flag beats the environment",
			mainYAML: validDoc,
			files:    map[string]string{"good": validDoc, "bad": invalidDoc},
			flag:     "{bad}",
			env:      ptr("{good}"),
			want:     checkViolations,
		},
		{
			name:     "flag beats the environment, the other way round",
			mainYAML: invalidDoc,
			files:    map[string]string{"good": validDoc, "bad": invalidDoc},
			flag:     "{good}",
			env:      ptr("{bad}"),
			want:     wantValid,
		},
		{
			name:     "blank environment is ignored",
			mainYAML: validDoc,
			env:      ptr("  "),
			want:     wantValid,
		},
		{
			name:     "empty environment is ignored",
			mainYAML: validDoc,
			env:      ptr(""),
			want:     wantValid,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tc.mainYAML != "" {
				writeFile(t, dir, "main.yaml", tc.mainYAML)
			}
			other := t.TempDir()
			subst := func(s string) string {
				for name, content := range tc.files {
					path := writeFile(t, other, name+".yaml", content)
					s = strings.ReplaceAll(s, "{"+name+"}", path)
				}
				return s
			}
			inv := invocation{args: []string{"config", "validate"}, dir: dir, env: map[string]string{}}
			if tc.flag != "" {
				inv.args = append(inv.args, "--config", subst(tc.flag))
			}
			if tc.env != nil {
				inv.env["DOPPEL_CONFIG_PATH"] = subst(*tc.env)
			}
			tc.want(t, doppel(t, inv))
		})
	}
}

func ptr(s string) *string { return &s }

func wantValid(t *testing.T, r result) {
	t.Helper()
	if r.code != wantOK || r.stdout != validOutput || r.stderr != "" {
		t.Fatalf("want exit 0, stdout %q and an empty stderr, got:\n%s", validOutput, r)
	}
}

// TestStoreSelection checks --store / DOPPEL_CONFIG_STORE and the database
// URL that the postgres store requires.
func TestStoreSelection(t *testing.T) {
	t.Parallel()
	const secretURL = "postgres://u:secret@127.0.0.1:1/db"
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want func(*testing.T, result)
	}{
		{
			name: "postgres without a database URL",
			args: []string{"--store", "postgres"},
			want: failedMentioning("--database-url"),
		},
		{
			name: "postgres with an empty database URL",
			args: []string{"--store", "postgres", "--database-url="},
			want: failedMentioning("--database-url"),
		},
		{
			name: "unknown store",
			args: []string{"--store", "bogus"},
			want: usageMentioning("bogus"),
		},
		{
			name: "unknown store from the environment",
			env:  map[string]string{"DOPPEL_CONFIG_STORE": "bogus"},
			want: usageMentioning("bogus"),
		},
		{
			name: "postgres from the environment without a database URL",
			env:  map[string]string{"DOPPEL_CONFIG_STORE": "postgres"},
			want: failedMentioning("--database-url"),
		},
		{
			name: "blank database URL in the environment is no URL",
			args: []string{"--store", "postgres"},
			env:  map[string]string{"DOPPEL_DATABASE_URL": "  "},
			want: failedMentioning("--database-url"),
		},
		{
			name: "flag --store file beats the environment",
			args: []string{"--store", "file"},
			env:  map[string]string{"DOPPEL_CONFIG_STORE": "postgres"},
			want: wantValid,
		},
		{
			name: "blank store in the environment is the default, file",
			env:  map[string]string{"DOPPEL_CONFIG_STORE": "  "},
			want: wantValid,
		},
		{
			name: "a database URL alone does not select postgres",
			args: []string{"--database-url", secretURL},
			want: wantValid,
		},
		{
			name: "postgres store is not built yet, password never shown",
			args: []string{"--store", "postgres", "--database-url", secretURL},
			want: notBuiltNoSecret,
		},
		{
			name: "postgres from the environment, password never shown",
			env:  map[string]string{"DOPPEL_CONFIG_STORE": "postgres", "DOPPEL_DATABASE_URL": secretURL},
			want: notBuiltNoSecret,
		},
		{
			name: "postgres with the URL from the environment, password never shown",
			args: []string{"--store", "postgres"},
			env:  map[string]string{"DOPPEL_DATABASE_URL": secretURL},
			want: notBuiltNoSecret,
		},
		{
			name: "usage error with a database URL, password never shown",
			args: []string{"--store", "postgres", "--database-url", secretURL, "--config-name="},
			want: func(t *testing.T, r result) {
				checkUsage(t, r)
				checkNoSecret(t, r)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A valid ./main.yaml is there, so that falling back to the
			// file store by mistake would succeed instead.
			dir := t.TempDir()
			writeFile(t, dir, "main.yaml", validDoc)
			args := append([]string{"config", "validate"}, tc.args...)
			tc.want(t, doppel(t, invocation{args: args, env: tc.env, dir: dir}))
		})
	}
}

func usageMentioning(s string) func(*testing.T, result) {
	return func(t *testing.T, r result) {
		t.Helper()
		checkUsage(t, r)
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr must mention %q, got:\n%s", s, r)
		}
	}
}

// failedMentioning: exit 1 with the reason on stderr naming s, no usage,
// and stdout empty (1.1 refuses a postgres store with no URL this way).
func failedMentioning(s string) func(*testing.T, result) {
	return func(t *testing.T, r result) {
		t.Helper()
		if r.code != wantRejected || r.stdout != "" || strings.Contains(r.stderr, "Usage:") || !strings.Contains(r.stderr, s) {
			t.Fatalf("want exit 1, no usage, stdout empty and stderr naming %q, got:\n%s", s, r)
		}
	}
}

// TestPostgresWithoutURLFails: every command that opens the store refuses
// the postgres store without a URL with exit 1, as 1.1 does, while the
// commands that always talk to PostgreSQL keep a missing required flag a
// usage error (exit 2), as 1.1's argument parser does.
func TestPostgresWithoutURLFails(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "s.sock")
	for _, args := range [][]string{
		{"serve", "--store", "postgres", "--socket", sock},
		{"config", "reload", "--store", "postgres"},
		{"token", "add", "--name", "ci", "--store", "postgres", "--socket", sock},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			t.Parallel()
			failedMentioning("--database-url")(t, doppel(t, invocation{args: args}))
		})
	}
	t.Run("serve from the environment", func(t *testing.T) {
		t.Parallel()
		failedMentioning("--database-url")(t, doppel(t, invocation{args: []string{"serve", "--socket", sock}, env: map[string]string{"DOPPEL_CONFIG_STORE": "postgres"}}))
	})
	for _, args := range [][]string{{"config", "migrate"}, {"config", "pull"}, {"config", "push", "--config", "main.yaml"}} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			t.Parallel()
			usageMentioning("database-url")(t, doppel(t, invocation{args: args}))
		})
	}
}

// notBuiltNoSecret: the postgres store does not exist yet, so reading from
// it fails (exit 1, reason on stderr, stdout empty), and the password of
// the database URL appears nowhere.
func notBuiltNoSecret(t *testing.T, r result) {
	t.Helper()
	if r.code != wantRejected {
		t.Fatalf("want exit 1, got:\n%s", r)
	}
	if r.stdout != "" {
		t.Errorf("stdout must stay empty when the store cannot be read, got:\n%s", r)
	}
	if r.stderr == "" {
		t.Errorf("stderr must give the reason, got nothing")
	}
	checkNoSecret(t, r)
}

func checkNoSecret(t *testing.T, r result) {
	t.Helper()
	if strings.Contains(r.stdout, "secret") || strings.Contains(r.stderr, "secret") {
		t.Errorf("the database password leaked:\n%s", r)
	}
}

func TestSchema(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile(repoPath(t, "doppel-config.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
	}{
		{name: "plain"},
		// The command reads nothing, so no store setting can disturb it.
		{name: "reads no document", env: map[string]string{"DOPPEL_CONFIG_PATH": "/does/not/exist.yaml"}},
		{name: "reads no store", env: map[string]string{"DOPPEL_CONFIG_STORE": "postgres"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := doppel(t, invocation{args: []string{"config", "schema"}, env: tc.env})
			if r.code != wantOK {
				t.Fatalf("want exit 0, got:\n%s", r)
			}
			if r.stderr != "" {
				t.Errorf("stderr must be empty, got:\n%s", r)
			}
			if !json.Valid([]byte(r.stdout)) {
				t.Fatalf("stdout is not valid JSON:\n%s", r.stdout)
			}
			if r.stdout != string(want) {
				t.Errorf("stdout differs from the checked-in doppel-config.schema.json (run `make schema`)")
			}
			var doc struct {
				Schema string `json:"$schema"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Schema != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("$schema = %q, want the 2020-12 meta-schema", doc.Schema)
			}
		})
	}
}
