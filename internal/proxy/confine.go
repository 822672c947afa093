package proxy

import (
	"net/http"
	"net/url"
	"strings"
)

// requestPath is the path as the client sent it, still escaped: never
// decoded, cleaned or re-encoded, so `/x%2Fy` and `/a//b/` reach the
// upstream as written. An absolute-form target (`GET http://evil/x`) gives
// only its path: the authority is never the client's to choose.
func requestPath(r *http.Request) (string, bool) {
	uri := r.RequestURI
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		uri = uri[:i]
	}
	if strings.HasPrefix(uri, "/") {
		return uri, true
	}
	if r.URL.Scheme != "" && r.URL.Host != "" {
		p := r.URL.EscapedPath()
		if p == "" {
			p = "/"
		}
		return p, strings.HasPrefix(p, "/")
	}
	return "", false // `*` (OPTIONS) and authority-form (CONNECT)
}

// buildTarget joins the proxy's base path (a directory) and the request
// path, then checks the built path: nothing may climb out of the base.
// A segment that is `.` or `..` once percent-decoded (1.1 refuses both),
// or a backslash written plainly or as %5c, is refused rather than
// sanitised.
func buildTarget(base, reqPath string) (string, bool) {
	built := base + strings.TrimPrefix(reqPath, "/")
	rest := built[len(base):]
	if strings.ContainsRune(rest, '\\') || containsFold(rest, "%5c") {
		return "", false
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if !strings.ContainsAny(seg, ".%") {
			continue
		}
		decoded, err := url.PathUnescape(seg)
		if err != nil {
			return "", false
		}
		// A decoded %2F would split the segment for an upstream that
		// decodes before routing; check each part it could become.
		for part := range strings.SplitSeq(decoded, "/") {
			if dotSegment(part) {
				return "", false
			}
		}
	}
	return built, true
}

// dotSegment: `.` and `..`, and `..;x`, which is `..` to servlet
// containers (they strip path parameters before resolving).
func dotSegment(part string) bool {
	return part == "." || part == ".." || strings.HasPrefix(part, "..;")
}

// refusal says why buildTarget refused reqPath, in 1.1's words where 1.1
// refuses it too. It runs only for a refused request.
func refusal(reqPath string) string {
	if strings.ContainsRune(reqPath, '\\') || containsFold(reqPath, "%5c") {
		return "request path `" + reqPath + "` contains a backslash"
	}
	for seg := range strings.SplitSeq(reqPath, "/") {
		decoded, err := url.PathUnescape(seg)
		if err != nil {
			return "request path `" + reqPath + "` is not valid percent-encoding"
		}
		for part := range strings.SplitSeq(decoded, "/") {
			if dotSegment(part) {
				return "request path `" + reqPath + "` contains a `.` or `..` segment"
			}
		}
	}
	return "the request path would leave the proxy's upstream"
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
