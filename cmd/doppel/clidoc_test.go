package main

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestCLIDocListsEveryFlag holds docs/cli.md to the commands: every
// command has its section, every flag of it (help aside) is in that
// section, every flag the section lists exists, and every command shows
// examples in its help.
func TestCLIDocListsEveryFlag(t *testing.T) {
	raw, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	_, list, ok := strings.Cut(doc, "## Every command and its flags")
	if !ok {
		t.Fatal("docs/cli.md has no list of every command and its flags")
	}
	sections := map[string]string{}
	for _, part := range strings.Split(list, "\n### `")[1:] {
		name, body, _ := strings.Cut(part, "`")
		sections[name] = body
	}
	root := newRoot(io.Discard, io.Discard)
	var walk func(c *cobra.Command)
	seen := map[string]bool{}
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		path := c.CommandPath()
		// A shell of `completion` is documented with it.
		if c.Parent() != nil && c.Parent().Name() == "completion" {
			path = c.Parent().CommandPath()
		}
		if (c.Runnable() && !c.HasSubCommands()) || c.Name() == "doppel" {
			section, ok := sections[path]
			if !ok {
				t.Errorf("docs/cli.md has no section for %q", path)
			}
			seen[path] = true
			c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
				if f.Name != "help" && !strings.Contains(section, "`--"+f.Name+"`") {
					t.Errorf("docs/cli.md does not list %s --%s", path, f.Name)
				}
			})
			for _, w := range strings.Split(section, "`--")[1:] {
				name, _, _ := strings.Cut(w, "`")
				if c.Flags().Lookup(name) == nil && !(path == "doppel" && name == "version") &&
					!(path == "doppel completion" && name == "no-descriptions") {
					t.Errorf("docs/cli.md lists %s --%s, which does not exist", path, name)
				}
			}
			if c.Example == "" && c.Parent() != nil && c.Parent().Name() != "completion" {
				t.Errorf("%s --help shows no examples", path)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for name := range sections {
		if !seen[name] {
			t.Errorf("docs/cli.md has a section for %q, which is no command", name)
		}
	}
}

// TestCLIHabits: what a cobra CLI's user reaches for first.
func TestCLIHabits(t *testing.T) {
	t.Parallel()
	if r := doppel(t, invocation{args: []string{"--version"}}); r.code != 0 || !strings.HasPrefix(r.stdout, "doppel ") {
		t.Errorf("--version: %v", r)
	} else if v := doppel(t, invocation{args: []string{"version"}}); v.stdout != r.stdout {
		t.Errorf("--version says %q, version says %q", r.stdout, v.stdout)
	}
	for shell, mark := range map[string]string{"bash": "bash completion", "zsh": "#compdef doppel", "fish": "fish completion", "powershell": "Register-ArgumentCompleter"} {
		if r := doppel(t, invocation{args: []string{"completion", shell}}); r.code != 0 || !strings.Contains(r.stdout, mark) {
			t.Errorf("completion %s: exit %d, %.80q", shell, r.code, r.stdout)
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}} {
		if r := doppel(t, invocation{args: args}); r.code != exitUsage {
			t.Errorf("%v: exit %d, want usage (2)", args, r.code)
		}
	}
	// No --config and no ./main.yaml: say how to point at one.
	r := doppel(t, invocation{args: []string{"serve"}})
	if r.code != 1 || !strings.Contains(r.stderr, "--config") || !strings.Contains(r.stderr, "./main.yaml") {
		t.Errorf("serve without a document: %v", r)
	}
}

// TestValidateSaysEverythingAtOnce: through the binary, `config validate`
// lists value errors and the rules on what parsed together; a template
// variable nothing binds (V22) is an advisory, said once the rest is fixed.
func TestValidateSaysEverythingAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "main.yaml", `server: {host: localhost, port: 8080}
admin: {host: 127.0.0.1, port: 8080}
proxies:
  - name: zeta
    type: http
    url: http://h
    loss: {percentage: 50, status: 503}
    latency: {percentage: 0.5, min: 2, max: 1}
    mocks:
      - name: item
        request: {method: GET, url: "^/items/(?P<id>[0-9]+)$"}
        response: {status: 200, json: '{"id": {{ idd }}}'}
`)
	r := doppel(t, invocation{args: []string{"config", "validate", "--config", cfg}})
	if r.code != 1 {
		t.Fatalf("exit %d: %v", r.code, r)
	}
	for _, want := range []string{
		"server.host: `localhost` is not an IP address",
		"proxies[0].loss.percentage: proxy `zeta`: 50 is not between 0.0 and 1.0",
		"admin.port: must differ from server.port",
		"proxies[0].latency.min: proxy `zeta`: min must be <= max: min is 2 s, max is 1 s",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}
	fixed := writeFile(t, dir, "fixed.yaml", `server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081}
proxies:
  - name: zeta
    type: http
    url: http://h
    mocks:
      - name: item
        request: {method: GET, url: "^/items/(?P<id>[0-9]+)$"}
        response: {status: 200, json: '{"id": {{ idd }}}'}
`)
	r = doppel(t, invocation{args: []string{"config", "validate", "--config", fixed}})
	if want := "advisory: proxies[0].mocks[0].response.json: the template reads `idd` (line 1, column 11), which nothing binds"; r.code != wantOK ||
		!strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "the variables here are doppel_version, host, id, method") {
		t.Errorf("want exit 0 and %q:\n%s", want, r)
	}
	// A tab in the indentation says so, with the line and column.
	tab := writeFile(t, dir, "tab.yaml", "server:\n\thost: 127.0.0.1\n")
	if r := doppel(t, invocation{args: []string{"config", "validate", "--config", tab}}); !strings.Contains(r.stdout, "YAML syntax error at column 1: tabs are not allowed for indentation") || !strings.Contains(r.stdout, "(line 2)") {
		t.Errorf("a tab: %v", r)
	}
}

// TestTheSecurityPageNamesRealTests: every test, fuzz target and benchmark
// docs/security.md says guards a promise or a bound exists, so the page
// cannot go on citing one that was renamed or removed.
func TestTheSecurityPageNamesRealTests(t *testing.T) {
	t.Parallel()
	page := readFile(t, repoPath(t, "docs/security.md"))
	named := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+)`").FindAllStringSubmatch(page, -1)
	if len(named) < 50 {
		t.Fatalf("docs/security.md names %d tests; the page lost its tables?", len(named))
	}
	defined := map[string]bool{}
	root := repoPath(t, ".")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+)\(`).FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range named {
		if !defined[m[1]] {
			t.Errorf("docs/security.md names %s, which no test file defines", m[1])
		}
	}
}
