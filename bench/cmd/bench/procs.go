package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one long-running process the orchestrator started.
type proc struct {
	name    string
	cmd     *exec.Cmd
	pid     int
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// logTail is the end of the process's log, for error messages.
func (p *proc) logTail() string {
	if p.logPath == "" || p.logPath == os.DevNull {
		return ""
	}
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "(nothing)"
	}
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return string(b)
}

// supervisor starts processes and, at the end, stops exactly those PIDs
// (and the worker PIDs an nginx master forked, recorded separately).
type supervisor struct {
	mu    sync.Mutex
	procs []*proc
	extra map[int]string // pid -> expected comm, e.g. nginx workers
}

func newSupervisor() *supervisor { return &supervisor{extra: map[int]string{}} }

// start runs argv with its stdout and stderr going to logPath (os.DevNull
// allowed) and stdoutPath when different, in dir, with env added to the
// orchestrator's environment (replacing variables of the same name).
func (s *supervisor) start(name, dir, stdoutPath, logPath string, env []string, argv ...string) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = mergeEnv(os.Environ(), env)
	// A process group of its own keeps a terminal's Ctrl-C from reaching the
	// servers directly (we stop them ourselves, in order); Pdeathsig is the
	// safety net if the orchestrator is killed outright.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	errf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	outf := errf
	if stdoutPath != "" && stdoutPath != logPath {
		if outf, err = os.OpenFile(stdoutPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			errf.Close()
			return nil, fmt.Errorf("%s: stdout file: %w", name, err)
		}
	}
	cmd.Stdout, cmd.Stderr = outf, errf
	if err := cmd.Start(); err != nil {
		errf.Close()
		if outf != errf {
			outf.Close()
		}
		return nil, fmt.Errorf("cannot start %s (%s): %w", name, argv[0], err)
	}
	p := &proc{name: name, cmd: cmd, pid: cmd.Process.Pid, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		errf.Close()
		if outf != errf {
			outf.Close()
		}
		close(p.done)
	}()
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p, nil
}

// track records an extra PID (an nginx worker) to check at the end.
func (s *supervisor) track(pid int, comm string) {
	s.mu.Lock()
	s.extra[pid] = comm
	s.mu.Unlock()
}

// stop stops one started process (SIGTERM, then SIGKILL after 5 s) and
// forgets it.
func (s *supervisor) stop(p *proc) {
	s.mu.Lock()
	s.procs = slices.DeleteFunc(s.procs, func(q *proc) bool { return q == p })
	s.mu.Unlock()
	terminate(p)
}

// terminate sends SIGTERM, and SIGKILL when p has not exited 5 s later.
func terminate(p *proc) {
	if p.exited() {
		return
	}
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		fmt.Fprintf(os.Stderr, "bench: %s (pid %d) ignored SIGTERM; sending SIGKILL\n", p.name, p.pid)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		<-p.done
	}
}

// stopAll sends SIGTERM to every started PID, newest first, waits up to 5 s
// for each, then SIGKILLs what is left; finally it kills any tracked worker
// PID that is still alive and still has the expected command name.
func (s *supervisor) stopAll() {
	s.mu.Lock()
	procs, extra := s.procs, s.extra
	s.procs, s.extra = nil, map[int]string{}
	s.mu.Unlock()

	for i := len(procs) - 1; i >= 0; i-- {
		terminate(procs[i])
	}
	for pid, comm := range extra {
		if c, err := procComm(pid); err == nil && c == comm {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func mergeEnv(base, add []string) []string {
	drop := map[string]bool{}
	for _, kv := range add {
		k, _, _ := strings.Cut(kv, "=")
		drop[k] = true
	}
	out := make([]string, 0, len(base)+len(add))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	return append(out, add...)
}

// waitListening waits until addr accepts TCP connections, failing early if
// the process exits first.
func waitListening(ctx context.Context, p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited during startup (%v); its log says:\n%s", p.name, p.waitErr, p.logTail())
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("nothing listening on %s after %s", addr, timeout)
			if p != nil {
				msg = fmt.Sprintf("%s: %s; its log says:\n%s", p.name, msg, p.logTail())
			}
			return errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// freePorts asks the kernel for n distinct free TCP ports on 127.0.0.1
// (all in the ephemeral range, i.e. high ports). They are held open until
// all n are chosen so that none repeats.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cannot find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// --- /proc accounting -------------------------------------------------------

// userHZ is the unit of utime/stime in /proc/PID/stat. The kernel ABI fixes
// USER_HZ at 100 on every architecture Linux exports it for.
const userHZ = 100

type statInfo struct {
	ppid        int
	utime, stim uint64
	comm        string
}

func readStat(pid int) (statInfo, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return statInfo{}, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return statInfo{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[end+1:])
	// f[0] is field 3 (state); ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return statInfo{}, fmt.Errorf("short /proc/%d/stat", pid)
	}
	var si statInfo
	si.comm = s[open+1 : end]
	si.ppid, _ = strconv.Atoi(f[1])
	si.utime, _ = strconv.ParseUint(f[11], 10, 64)
	si.stim, _ = strconv.ParseUint(f[12], 10, 64)
	return si, nil
}

func procComm(pid int) (string, error) {
	si, err := readStat(pid)
	return si.comm, err
}

// processTree is pid and all its live descendants (children, grandchildren).
// Threads need no walking: a process's stat line already sums its threads.
func processTree(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return []int{pid}
	}
	children := map[int][]int{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if si, err := readStat(n); err == nil {
			children[si.ppid] = append(children[si.ppid], n)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// treeCPU is the user+system CPU time of pid and its descendants.
func treeCPU(pid int) (time.Duration, error) {
	var ticks uint64
	for i, p := range processTree(pid) {
		si, err := readStat(p)
		if err != nil {
			if i == 0 {
				return 0, fmt.Errorf("process %d is gone: %w", pid, err)
			}
			continue // a descendant that just exited
		}
		ticks += si.utime + si.stim
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// rssOf sums VmRSS over pids, in bytes.
func rssOf(pids []int) int64 {
	var total int64
	for _, p := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "status"))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				f := strings.Fields(rest)
				if len(f) > 0 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					total += kb * 1024
				}
				break
			}
		}
	}
	return total
}
