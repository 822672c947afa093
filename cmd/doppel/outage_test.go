package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cluster is a PostgreSQL server of this test's own, so that it can be
// stopped without disturbing the other tests' server.
type cluster struct {
	t      *testing.T
	bindir string
	dir    string
	port   int
}

func (c *cluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *cluster) run(args ...string) {
	c.t.Helper()
	name := filepath.Join(c.bindir, args[0])
	cmd := exec.Command(name, args[1:]...)
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args[1:]...)...)
	}
	cmd.Dir = c.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

func (c *cluster) start() {
	c.run("pg_ctl", "-D", filepath.Join(c.dir, "data"), "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60", "start",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", c.port, c.dir))
}

func (c *cluster) stop() {
	c.run("pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "fast", "-w", "stop")
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	bindir := os.Getenv("DOPPEL_PG_BINDIR")
	if bindir == "" {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
		if len(matches) == 0 {
			t.Fatal("no PostgreSQL server binaries (initdb): install PostgreSQL, or set DOPPEL_PG_BINDIR")
		}
		bindir = filepath.Dir(matches[len(matches)-1])
	}
	dir, err := os.MkdirTemp("", "doppel-outage-")
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal("running as root needs a postgres user to run the server as")
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		_ = os.Chown(dir, uid, gid)
	}
	c := &cluster{t: t, bindir: bindir, dir: dir, port: freePorts(t, 1)[0]}
	c.run("initdb", "--auth=trust", "-U", "postgres", "--no-sync", "-D", filepath.Join(dir, "data"))
	c.start()
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(bindir, "pg_ctl"), "-D", filepath.Join(dir, "data"), "-m", "immediate", "stop")
		if os.Geteuid() == 0 {
			cmd = exec.Command("runuser", "-u", "postgres", "--", filepath.Join(bindir, "pg_ctl"), "-D", filepath.Join(dir, "data"), "-m", "immediate", "stop")
		}
		_ = cmd.Run()
		os.RemoveAll(dir)
	})
	return c
}

// TestReplicasSurviveADatabaseOutage: with the database stopped, two
// replicas keep proxying on their last good configuration; once it is back
// they reconnect, and a change made meanwhile reaches both.
func TestReplicasSurviveADatabaseOutage(t *testing.T) {
	t.Parallel()
	db := newCluster(t)
	url := db.url()
	if r := doppel(t, invocation{args: []string{"config", "migrate", "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("still here")) })
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("zeta", up.URL, ""))
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	if r := doppel(t, invocation{args: []string{"config", "push", "--config", cfg, "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	var replicas []*proc
	var addrs, admins []string
	for range 2 {
		p := startProc(t, invocation{args: []string{"serve", "--store", "postgres", "--database-url", url,
			"--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--socket", filepath.Join(t.TempDir(), "s.sock")}})
		addrs = append(addrs, p.waitServing())
		admins = append(admins, adminAddrOf(t, p))
		replicas = append(replicas, p)
	}
	db.stop()
	for i, addr := range addrs {
		for range 20 {
			r, err := get(newClient(), "http://"+addr+"/x", nil)
			if err != nil || string(r.body) != "still here" {
				t.Fatalf("replica %d stopped proxying while the database was down: %v %s", i, err, r.body)
			}
		}
	}
	db.start()
	// A push made after the outage reaches both replicas by themselves.
	cfg2 := writeFile(t, dir, "next.yaml", readFile(t, cfg)+"logging: {level: warn, format: json}\n")
	deadline := time.Now().Add(45 * time.Second)
	var pushed string
	for {
		if r := doppel(t, invocation{args: []string{"config", "push", "--config", cfg2, "--database-url", url}}); r.code == 0 {
			pushed = strings.TrimSpace(strings.TrimPrefix(r.stdout, "pushed: revision "))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the database did not come back")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A session made on the first replica after the outage reaches the
	// second, by its notification or by its catch-up when it reconnects.
	session := `{"id": "after-outage", "proxies": {"zeta": {"loss": {"percentage": 1.0, "status": 503}}}}`
	for {
		if r := call(t, "POST", "http://"+admins[0]+"/api/v1/sessions", session); r.status == 201 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no session could be made after the outage: %d %s", r.status, r.body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		r, err := get(newClient(), "http://"+addrs[1]+"/x", map[string]string{"X-Doppel-Session": "after-outage"})
		if err == nil && r.status == 503 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second replica never applied the session made after the outage: %v\n%s", err, replicas[1])
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, p := range replicas {
		p.waitLine("the pushed revision", 45*time.Second, func(l string) bool {
			return lineMsg(l) == "config reloaded" && lineField(l, "source") == "the database" && lineField(l, "revision") == pushed
		})
		if r, err := get(newClient(), "http://"+addrs[i]+"/x", nil); err != nil || string(r.body) != "still here" {
			t.Fatalf("replica %d after the outage: %v", i, err)
		}
		p.signal(syscall.SIGTERM)
		p.waitExit(exitTimeout)
	}
}
