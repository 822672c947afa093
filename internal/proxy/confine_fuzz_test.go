package proxy

import (
	"bufio"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzBases are the proxy base paths the fuzzer picks from: each a
// directory, escaped and ending in "/", as runtime.Proxy.BasePath is.
var fuzzBases = []string{"/", "/api/", "/a/b/"}

// upstreamResolve is what an upstream that is generous about paths makes
// of one: every segment percent-decoded (so %2F splits a segment and %5C
// becomes a backslash), backslashes taken as separators, then `.` and `..`
// resolved as path.Clean does. ok is false when the path does not decode.
func upstreamResolve(p string) (string, bool) {
	decoded, err := url.PathUnescape(p)
	if err != nil {
		return "", false
	}
	decoded = strings.ReplaceAll(decoded, `\`, "/")
	return path.Clean("/" + decoded), true
}

// under reports whether the resolved path p lies in the directory dir
// (itself included).
func under(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

// checkConfined asserts the confinement property for one base and one
// request path: whatever buildTarget accepts starts with the base and,
// resolved the way an upstream might, stays under the decoded base.
func checkConfined(t *testing.T, base, reqPath string) {
	t.Helper()
	built, ok := buildTarget(base, reqPath)
	if !ok {
		if why := refusal(reqPath); why == "" || !utf8.ValidString(why) && utf8.ValidString(reqPath) {
			t.Fatalf("refusal(%q) = %q", reqPath, why)
		}
		return
	}
	if !strings.HasPrefix(built, base) {
		t.Fatalf("buildTarget(%q, %q) = %q, which does not start with the base", base, reqPath, built)
	}
	resolved, decodes := upstreamResolve(built)
	if !decodes {
		t.Fatalf("buildTarget(%q, %q) accepted %q, which does not percent-decode", base, reqPath, built)
	}
	baseDir, _ := upstreamResolve(base)
	if !under(resolved, baseDir) {
		t.Fatalf("buildTarget(%q, %q) = %q, which an upstream resolves to %q: outside %q", base, reqPath, built, resolved, baseDir)
	}
}

// FuzzConfinement asserts the property of §5.2, not a list of bad inputs:
// a built URL never leaves the proxy's base path. The request path is
// tried twice: handed to buildTarget as is, and as the target of a request
// line parsed the way the server parses one, through requestPath.
func FuzzConfinement(f *testing.F) {
	for i := range fuzzBases {
		for _, p := range []string{
			"/", "/r/42", "/x%2Fy", "/a//b/", "/a..b", "/..", "/%2e%2e", "/.%2E/x",
			"/%2e%2e%2fx", "/a/%2F..%2F..", "/a/..%2f..%2fetc", `/a\..\..`, "/a%5c..%5c..",
			"/%252e%252e/", "/./.", "//..", "///x", "/%", "/%zz", "/a/%2e", "/..;/x",
			"/%c0%ae%c0%ae/", "http://evil/x", "http://evil/../x", "*", "/?q=/../..",
		} {
			f.Add(byte(i), p)
		}
	}
	f.Fuzz(func(t *testing.T, idx byte, target string) {
		base := fuzzBases[int(idx)%len(fuzzBases)]
		checkConfined(t, base, target)

		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET " + target + " HTTP/1.1\r\nHost: doppel\r\n\r\n")))
		if err != nil {
			return
		}
		p, ok := requestPath(r)
		if !ok {
			return
		}
		if !strings.HasPrefix(p, "/") {
			t.Fatalf("requestPath of %q gave %q, which is not a path", target, p)
		}
		checkConfined(t, base, p)
	})
}
