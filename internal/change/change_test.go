package change

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/store"
	"github.com/doppelproxy/doppel/internal/store/file"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

const doc = `server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081}
proxies:
  - name: zeta
    type: http
    url: http://127.0.0.1:9001
    mocks:
      - {name: ma, request: {method: GET, url: "^/a$"}, response: {status: 200, template: a.j2}}
      - {name: mb, request: {method: GET, url: "^/b$"}, response: {status: 200, template: b.j2}}
  - name: alpha
    type: http
    url: http://127.0.0.1:9002
    resolve: {type: header, header: X-Backend}
    mocks:
      - {name: mc, request: {method: GET, url: "^/c$"}, response: {status: 200, template: c.j2}}
`

type fixture struct {
	ctl  *Controller
	st   *file.Store
	path string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "main.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := file.Open(path, filepath.Join(dir, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := st.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.Compile(snap.Document)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{ctl: New(runtime.NewHolder(rt), st, nil), st: st, path: path}
}

func (f *fixture) files(t *testing.T, proxy string) []string {
	t.Helper()
	list, err := f.ctl.Templates(context.Background(), proxy)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range list {
		names = append(names, x.Name)
	}
	return names
}

// TestTemplateFilesFollowWrites: a rename takes a proxy's files along, a
// deletion removes them, and every proxy, changed by the write or not,
// keeps only the files its mocks name (SPEC §19.4: the directory is what
// the document says).
func TestTemplateFilesFollowWrites(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, w := range [][2]string{{"zeta", "a.j2"}, {"zeta", "b.j2"}, {"alpha", "c.j2"}} {
		if err := f.ctl.WriteTemplate(ctx, w[0], w[1], []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// A file put there by hand, which no mock names.
	if err := f.st.WriteTemplate(ctx, "alpha", "stray.j2", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Uploads are checked against the configuration in force, under the
	// lock: a proxy that is not there, a file no mock names.
	if err := f.ctl.WriteTemplate(ctx, "omega", "a.j2", nil); !errors.Is(err, ErrNoSuchProxy) {
		t.Errorf("an upload to a missing proxy: %v", err)
	}
	if err := f.ctl.WriteTemplate(ctx, "alpha", "stray.j2", nil); !errors.Is(err, ErrNotDeclared) {
		t.Errorf("an upload no mock names: %v", err)
	}
	// zeta drops mock b and is renamed omega; alpha is left alone.
	_, err := f.ctl.Write(ctx, func(d *config.Document) error {
		p := d.Proxy("zeta")
		p.Name = "omega"
		p.Mocks = p.Mocks[:1]
		return nil
	}, Move{From: "zeta", To: "omega"})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.files(t, "omega"); !slices.Equal(got, []string{"a.j2"}) {
		t.Errorf("the renamed proxy's files: %v, want [a.j2] (b.j2 is named by no mock)", got)
	}
	if got := f.files(t, "zeta"); len(got) != 0 {
		t.Errorf("files left under the old name: %v", got)
	}
	if got := f.files(t, "alpha"); !slices.Equal(got, []string{"c.j2"}) {
		t.Errorf("an unchanged proxy's files: %v, want [c.j2] (stray.j2 is named by no mock)", got)
	}
	if f.ctl.Runtime().Document.Proxy("omega") == nil {
		t.Error("the write is not in force")
	}
	_, err = f.ctl.Write(ctx, func(d *config.Document) error {
		d.Proxies = slices.DeleteFunc(d.Proxies, func(p config.Proxy) bool { return p.Name == "alpha" })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.files(t, "alpha"); len(got) != 0 {
		t.Errorf("a deleted proxy's files remain: %v", got)
	}
}

// TestTemplateWritesWaitForAChange: a template file is never written in
// the middle of a change of the document.
func TestTemplateWritesWaitForAChange(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	inEdit, release := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = f.ctl.Write(ctx, func(d *config.Document) error {
			close(inEdit)
			<-release
			return nil
		})
	}()
	<-inEdit
	wrote := make(chan struct{})
	go func() {
		_ = f.ctl.WriteTemplate(ctx, "zeta", "a.j2", []byte("x"))
		close(wrote)
	}()
	select {
	case <-wrote:
		t.Fatal("a template file was written while the document was being changed")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-wrote
}

// feed is a store.Watcher the test drives.
type feed struct{ changed func(string) bool }

func (f *feed) Watch(_ context.Context, _ *slog.Logger, changed func(string) bool) (<-chan struct{}, error) {
	f.changed = changed
	return nil, nil
}
func (f *feed) Describe() string { return "the test" }

// failing is a store whose loads fail until it is told otherwise.
type failing struct {
	store.Store
	fail bool
}

func (s *failing) Load(ctx context.Context) (*store.Snapshot, error) {
	if s.fail {
		return nil, errors.New("connection reset")
	}
	return s.Store.Load(ctx)
}

// TestFollowReloadsWhatChangedElsewhere: its own revision costs nothing;
// another is a reload; an invalid document is refused for good; a failure
// that may pass is asked again.
func TestFollowReloadsWhatChangedElsewhere(t *testing.T) {
	f := newFixture(t)
	st := &failing{Store: f.st}
	f.ctl.store = st
	w := &feed{}
	if _, err := f.ctl.Follow(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	before := f.ctl.Runtime()
	if !w.changed(string(before.Revision)) || f.ctl.Runtime() != before {
		t.Fatal("the revision in force was reloaded")
	}
	edited := strings.Replace(doc, "9001", "9009", 1)
	if err := os.WriteFile(f.path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	st.fail = true
	var logged strings.Builder
	log := telemetry.NewLogger(&logged, "info", "json")
	f.ctl.log = log
	for range 3 {
		if w.changed("") {
			t.Fatal("a failed load was reported done: it would not be tried again")
		}
	}
	log.Flush()
	if n := strings.Count(logged.String(), "could not be loaded"); n != 1 {
		t.Fatalf("a failure that repeats is logged %d times, want once:\n%s", n, logged.String())
	}
	st.fail = false
	if !w.changed("") || f.ctl.Runtime().Proxies[0].Upstream.Port() != "9009" {
		t.Fatal("the change was not reloaded")
	}
	if err := os.WriteFile(f.path, []byte(strings.Replace(edited, "type: http", "type: udp", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	running := f.ctl.Runtime()
	if !w.changed("") {
		t.Fatal("an invalid document is asked again: it stays invalid until the next change")
	}
	if f.ctl.Runtime() != running {
		t.Fatal("an invalid document replaced the running configuration")
	}
}

// racing is a store whose first save finds that another writer got there
// first, and says so wrapped, as a driver would.
type racing struct {
	store.Store
	saves int
}

func (s *racing) Save(ctx context.Context, doc *config.Document, expected config.Revision) (config.Revision, error) {
	s.saves++
	if s.saves == 1 {
		return "", fmt.Errorf("saving: %w", store.ErrRevisionMismatch)
	}
	return s.Store.Save(ctx, doc, expected)
}

// TestWriteRetriesAMovedStore: a wrapped mismatch is a retry, not a failure.
func TestWriteRetriesAMovedStore(t *testing.T) {
	f := newFixture(t)
	st := &racing{Store: f.st}
	f.ctl.store = st
	rt, err := f.ctl.Write(context.Background(), func(d *config.Document) error {
		d.Proxy("zeta").Timeout = 7
		return nil
	})
	if err != nil || st.saves != 2 || rt.Document.Proxy("zeta").Timeout != 7 {
		t.Fatalf("write: %v after %d saves", err, st.saves)
	}
}

// TestEverySwapHookRuns: what each part registers runs on every swap.
func TestEverySwapHookRuns(t *testing.T) {
	f := newFixture(t)
	var calls []string
	f.ctl.OnSwap(func(_, _ *runtime.Runtime) { calls = append(calls, "metrics") })
	f.ctl.OnSwap(func(_, _ *runtime.Runtime) { calls = append(calls, "journal") })
	if _, err := f.ctl.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(calls) != "[metrics journal]" {
		t.Fatalf("hooks run: %v", calls)
	}
}

// TestServerTLSNeedsARestart: server.tls set, changed or removed is said
// to take effect on a restart, as the rest of server is.
func TestServerTLSNeedsARestart(t *testing.T) {
	load := func(tls string) *config.Document {
		d, err := config.Load([]byte(strings.Replace(doc, "port: 8080}", "port: 8080"+tls+"}", 1)))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	plain, auto, files := load(""), load(", tls: {auto: true}"), load(", tls: {cert: c.pem, key: k.pem}")
	for _, c := range []struct {
		name       string
		from, to   *config.Document
		wantServer bool
	}{
		{"set", plain, auto, true},
		{"changed", auto, files, true},
		{"removed", files, plain, true},
		{"the same", files, load(", tls: {cert: c.pem, key: k.pem}"), false},
	} {
		if got := slices.Contains(Unapplied(c.from, c.to), "server"); got != c.wantServer {
			t.Errorf("%s: server unapplied %v, want %v", c.name, got, c.wantServer)
		}
	}
}
