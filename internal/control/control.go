// Package control is the control socket: a Unix socket that carries
// `doppel config reload` and `doppel token add` to a running serve. Each
// connection carries one JSON request line and one JSON response line.
// Both commands go through change.Controller, so they share the lock of
// every admin API write.
package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/doppelproxy/doppel/internal/change"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/google/uuid"
)

// Request is one command.
type Request struct {
	Command string `json:"command"` // "reload" or "token_add"
	Name    string `json:"name,omitempty"`
	Group   string `json:"group,omitempty"`
	// Serves is the configuration the command is meant for, as the
	// server's Serves names it; a server that serves another refuses the
	// command and changes nothing. Empty: any.
	Serves string `json:"serves,omitempty"`
}

// Response is its answer. Code is an error code of the closed set when
// the command was refused.
type Response struct {
	OK         bool     `json:"ok"`
	Code       string   `json:"code,omitempty"`
	Message    string   `json:"message,omitempty"`
	Violations []string `json:"violations,omitempty"`
	Revision   string   `json:"revision,omitempty"`
	Proxies    int      `json:"proxies,omitempty"`     // every kind
	TCPProxies int      `json:"tcp_proxies,omitempty"` // of those, tcp proxies
	Unapplied  []string `json:"unapplied,omitempty"`
	Token      string   `json:"token,omitempty"`
	// Serves is what the answering Doppel serves (its Server.Serves).
	Serves string `json:"serves,omitempty"`
}

// Mismatch is the code of a command refused because the Doppel behind
// the socket serves another configuration than the one it names.
const Mismatch = "CONFLICT"

// Server answers on the control socket.
type Server struct {
	// Serves names the configuration this Doppel serves ("the file
	// /abs/main.yaml", or a database's configuration), so that a command
	// meant for another is refused rather than carried out here.
	Serves   string
	ctl      *change.Controller
	envNames []config.Name // token names DOPPEL_ADMIN_TOKENS claims
	ln       net.Listener
	path     string
	made     fs.FileInfo // the socket at path, as Listen made it
	wg       sync.WaitGroup
}

// Listen creates the socket at path (mode 0600). Its directory must exist.
// A socket file with nothing behind it (left by a crash) is replaced; a
// live one belongs to another process and is never taken over, and
// anything else at path (a regular file, a directory) is never removed:
// the start is refused, naming it.
//
// The socket is bound inside a directory of its own (mode 0700), made
// 0600 there, then linked into place: it is never reachable wider than
// its owner, not even between the bind and the chmod, and the process's
// umask is left alone.
func Listen(path string, ctl *change.Controller, envNames []config.Name) (*Server, error) {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("the control socket's directory %s does not exist (control.socket, or --socket)", dir)
	}
	if err := clearStale(path); err != nil {
		return nil, err
	}
	private, err := os.MkdirTemp(dir, ".dpl")
	if err != nil {
		return nil, fmt.Errorf("the control socket cannot be created in %s: %w", dir, err)
	}
	defer os.RemoveAll(private)
	bound := filepath.Join(private, "s")
	ln, err := net.Listen("unix", bound)
	if err != nil {
		return nil, fmt.Errorf("the control socket cannot be created at %s: %w", path, err)
	}
	// The path it was bound at goes with the directory; the one it is
	// served at is removed by Close, and only while it is this socket.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(bound, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	// A link, unlike a rename, never replaces what appeared at path since
	// it was looked at.
	if err := os.Link(bound, path); err != nil {
		ln.Close()
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("the control socket %s appeared while this doppel was starting: another process made it; nothing was removed", path)
		}
		return nil, fmt.Errorf("the control socket cannot be created at %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &Server{ctl: ctl, envNames: envNames, ln: ln, path: path, made: fi}, nil
}

// clearStale makes room at path for the socket: nothing there, or a
// socket nothing listens on (removed). A live socket, and anything that
// is not a socket, refuse the start.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("the control socket %s cannot be looked at: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("the control socket's path %s holds a %s, not a socket; doppel never removes it: move it away, or set control.socket (or --socket) to another path", path, kindOf(fi))
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("the control socket %s is in use by another process: another doppel serve is running with it (set control.socket or --socket for this one)", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("cannot replace the stale control socket %s: %w", path, err)
	}
	return nil
}

func kindOf(fi fs.FileInfo) string {
	switch m := fi.Mode(); {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	default:
		return "file that is not a socket (" + m.Type().String() + ")"
	}
}

// Serve answers connections until Close.
func (s *Server) Serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(c)
		}()
	}
}

// Close stops listening, waits for answers under way and removes the
// socket, if what is at its path is still the socket Listen made.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.wg.Wait()
	if now, statErr := os.Lstat(s.path); statErr == nil && os.SameFile(now, s.made) {
		if rmErr := os.Remove(s.path); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
			err = rmErr
		}
	}
	return err
}

func (s *Server) handle(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	// One request is a short line: a client cannot make it grow.
	line, err := bufio.NewReader(io.LimitReader(c, 64<<10)).ReadBytes('\n')
	var resp Response
	var req Request
	if err == nil {
		req, err = parseRequest(line)
	}
	if err != nil {
		resp = Response{Code: "CONFIG_INVALID", Message: "one JSON request line was expected"}
		var inv *config.Invalid
		if errors.As(err, &inv) {
			resp.Violations = inv.Lines()
		}
	} else {
		resp = s.do(context.Background(), req)
	}
	b, _ := json.Marshal(resp)
	_, _ = c.Write(append(b, '\n'))
}

// parseRequest reads one request line: the JSON encoding of a Request.
// Its nesting is bounded as a document's is (config.CheckNesting).
func parseRequest(line []byte) (Request, error) {
	var req Request
	if err := config.CheckNesting(line); err != nil {
		return req, err
	}
	err := json.Unmarshal(line, &req)
	return req, err
}

func (s *Server) do(ctx context.Context, req Request) Response {
	resp := s.command(ctx, req)
	resp.Serves = s.Serves
	return resp
}

func (s *Server) command(ctx context.Context, req Request) Response {
	if req.Serves != "" && s.Serves != "" && req.Serves != s.Serves {
		return Response{Code: Mismatch, Message: fmt.Sprintf("this doppel serves %s, not %s: nothing was changed", s.Serves, req.Serves)}
	}
	switch req.Command {
	case "reload":
		res, err := s.ctl.Reload(ctx)
		if err != nil {
			return failure(err)
		}
		all, tcp := res.Runtime.ProxyCount()
		return Response{OK: true, Revision: string(res.Runtime.Revision), Proxies: all, TCPProxies: tcp, Unapplied: res.Unapplied}
	case "token_add":
		return s.addToken(ctx, req)
	}
	return Response{Code: "CONFIG_INVALID", Message: fmt.Sprintf("unknown command %q", req.Command)}
}

func (s *Server) addToken(ctx context.Context, req Request) Response {
	name, err := config.ParseName(req.Name)
	if err != nil {
		return Response{Code: "CONFIG_INVALID", Message: "name: " + err.Error()}
	}
	group := config.GroupUser
	if req.Group != "" {
		if group, err = config.ParseName(req.Group); err != nil {
			return Response{Code: "CONFIG_INVALID", Message: "group: " + err.Error()}
		}
	}
	// A refused name is CONFIG_INVALID at `name`, the command's own
	// argument, as Doppel 1.1 answers it.
	if slices.Contains(s.envNames, name) {
		return failure(&config.Invalid{Violations: []config.Violation{{Path: "name", Message: "`" + string(name) +
			"` is supplied by the environment (DOPPEL_ADMIN_TOKENS), so a token issued here under that name would never authenticate, since the environment's is looked up first; pick another name"}}})
	}
	token := config.Token(uuid.NewString())
	rt, err := s.ctl.Write(ctx, func(doc *config.Document) error {
		for _, t := range doc.Admin.Tokens {
			if t.Name == name {
				return &config.Invalid{Violations: []config.Violation{{Path: "name", Message: "a token named `" + string(name) + "` already exists"}}}
			}
		}
		doc.Admin.Tokens = append(doc.Admin.Tokens, config.TokenEntry{Name: name, Group: group, Token: token})
		return nil
	})
	if err != nil {
		return failure(err)
	}
	return Response{OK: true, Revision: string(rt.Revision), Token: string(token)}
}

func failure(err error) Response {
	var (
		inv      *config.Invalid
		conflict *change.Conflict
	)
	switch {
	case errors.As(err, &inv):
		return Response{Code: "CONFIG_INVALID", Message: "the configuration is invalid", Violations: inv.Lines()}
	case errors.As(err, &conflict):
		return Response{Code: "CONFLICT", Message: conflict.Error()}
	}
	return Response{Code: "STORE_ERROR", Message: err.Error()}
}

// Call sends one request to the socket at path and returns the answer.
func Call(path string, req Request) (*Response, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the control socket %s (is doppel serve running with it?): %w", path, unwrapOp(err))
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("no answer on the control socket %s: %w", path, err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("the control socket answered something that is not JSON: %s", strings.TrimSpace(string(line)))
	}
	return &resp, nil
}

func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
