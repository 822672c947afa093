package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// HTTP/2 and gRPC through the binary (SPEC §17.7): a real gRPC server
// (the health and reflection services) behind Doppel, a real gRPC client
// in front, cleartext HTTP/2 (h2c) on both sides.

// grpcUpstream serves the health service (unary Check, server-streaming
// Watch) and reflection (a bidirectional stream).
func grpcUpstream(t *testing.T) (string, *health.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String(), hs
}

// grpcDoppel serves one proxy, rpc, in front of upstream, with extra YAML.
func grpcDoppel(t *testing.T, upstream, extra string) (*proc, string, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, fmt.Sprintf("proxies:\n  - name: rpc\n    type: http\n    url: http://%s/\n%s", upstream, extra))
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	p, addr := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	return p, addr, adminAddrOf(t, p)
}

// grpcClient dials Doppel in cleartext; dials counts the connections.
func grpcClient(t *testing.T, addr string, dials *atomic.Int32, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			if dials != nil {
				dials.Add(1)
			}
			return (&net.Dialer{}).DialContext(ctx, "tcp", a)
		}))
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func TestGRPCCallsPassThrough(t *testing.T) {
	t.Parallel()
	up, hs := grpcUpstream(t)
	p, addr, _ := grpcDoppel(t, up, "")
	cc := grpcClient(t, addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(cc)

	// Unary, and an error status, which travels in the trailers.
	res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: %v %v", res, err)
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check of an unknown service: %v, want NotFound", err)
	}

	// Server streaming: each update arrives as it is sent.
	hs.SetServingStatus("shop", healthpb.HealthCheckResponse_SERVING)
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []healthpb.HealthCheckResponse_ServingStatus{healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING} {
		got, err := w.Recv()
		if err != nil || got.Status != want {
			t.Fatalf("update %d: %v %v, want %v", i, got, err, want)
		}
		next := healthpb.HealthCheckResponse_NOT_SERVING
		if want == healthpb.HealthCheckResponse_NOT_SERVING {
			next = healthpb.HealthCheckResponse_SERVING
		}
		hs.SetServingStatus("shop", next)
	}

	// Both ways at once: a bidirectional stream of many messages.
	rc := reflectionpb.NewServerReflectionClient(cc)
	stream, err := rc.ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"}}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		got, err := stream.Recv()
		if err != nil {
			t.Fatalf("recv %d: %v", i, err)
		}
		names := fmt.Sprint(got.GetListServicesResponse().GetService())
		if !strings.Contains(names, "grpc.health.v1.Health") {
			t.Fatalf("services %d: %s", i, names)
		}
	}
	_ = stream.CloseSend()
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("the stream's end: %v", err)
	}

	line := tunnelLine(t, p, "/grpc.health.v1.Health/Check")
	if line["status"] != json.Number("200") || line["upstream_status"] != json.Number("200") {
		t.Errorf("the request line: %v", line)
	}
}

// TestTrailersPassBothWays: an HTTP/2 request's trailers reach the
// upstream, and the upstream's reach the client.
func TestTrailersPassBothWays(t *testing.T) {
	t.Parallel()
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "X-Checksum")
		w.Header().Set("X-Proto", r.Proto)
		_, _ = fmt.Fprintf(w, "got %d bytes, trailer %q", len(b), r.Trailer.Get("X-Sent"))
		w.Header().Set("X-Checksum", "abc123")
	})
	// The upstream speaks h2c too: the client's HTTP/2 goes to it as
	// HTTP/2 only for gRPC; this one is forwarded as HTTP/1.1.
	_, addr, _ := grpcDoppel(t, strings.TrimPrefix(up.URL, "http://"), "")
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	for _, tc := range []struct {
		proto int
		tr    *http.Transport
	}{{2, h2c}, {1, &http.Transport{}}} {
		t.Run(fmt.Sprint("HTTP/", tc.proto), func(t *testing.T) {
			defer tc.tr.CloseIdleConnections()
			body := io.MultiReader(strings.NewReader(strings.Repeat("a", 10000)))
			req, _ := http.NewRequest("POST", "http://"+addr+"/upload", body)
			req.Trailer = http.Header{"X-Sent": {"sent-after-the-body"}}
			res, err := (&http.Client{Transport: tc.tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.ProtoMajor != tc.proto || string(b) != `got 10000 bytes, trailer "sent-after-the-body"` || res.Trailer.Get("X-Checksum") != "abc123" {
				t.Errorf("%s %q trailer %v", res.Proto, b, res.Trailer)
			}
		})
	}
}

func TestGRPCLossIsAStatusAClientRetries(t *testing.T) {
	t.Parallel()
	up, _ := grpcUpstream(t)
	_, addr, admin := grpcDoppel(t, up, "    loss: {percentage: 1, status: 503, grpc_status: 14, when: {count: {first: 2}}}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Without a retry policy: the status the loss says.
	_, err := healthpb.NewHealthClient(grpcClient(t, addr, nil)).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "injected loss") {
		t.Fatalf("the first call: %v, want UNAVAILABLE", err)
	}
	// A plain request to the same proxy gets the envelope with its status.
	r := mustGet(t, newClient(), "http://"+addr+"/plain", nil)
	if r.status != 503 || !strings.Contains(string(r.body), "LOSS_INJECTED") {
		t.Errorf("a plain request: %d %s", r.status, r.body)
	}
	// Reset the count, then a client whose service config retries
	// UNAVAILABLE gets through on its third attempt.
	req, _ := http.NewRequest("DELETE", "http://"+admin+"/api/v1/proxies/rpc/counters", nil)
	if res, err := newClient().Do(req); err != nil || res.StatusCode != 204 {
		t.Fatalf("reset: %v %v", res, err)
	}
	retrying := grpcClient(t, addr, nil, grpc.WithDefaultServiceConfig(`{"methodConfig": [{
		"name": [{"service": "grpc.health.v1.Health"}],
		"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.02s", "maxBackoff": "0.1s", "backoffMultiplier": 2,
			"retryableStatusCodes": ["UNAVAILABLE"]}}]}`))
	res, err := healthpb.NewHealthClient(retrying).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("with retries: %v %v", res, err)
	}
	body := `{"match": {"proxy": "rpc", "path": "^/grpc.health.v1.Health/Check$"}, "count": {"min": 4, "max": 4}}`
	vres, err := newClient().Post("http://"+admin+"/api/v1/requests/verify", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer vres.Body.Close()
	if b, _ := io.ReadAll(vres.Body); vres.StatusCode != 200 {
		t.Errorf("one call without retries and three attempts: %d %s", vres.StatusCode, b)
	}
}

func TestAnAbortOnHTTP2ResetsTheStreamNotTheConnection(t *testing.T) {
	t.Parallel()
	up, _ := grpcUpstream(t)
	_, addr, _ := grpcDoppel(t, up, "    abort: {percentage: 1, at: request, when: {count: {first: 1}}}\n")
	var dials atomic.Int32
	hc := healthpb.NewHealthClient(grpcClient(t, addr, &dials))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
	if code := status.Code(err); code != codes.Internal && code != codes.Unavailable {
		t.Fatalf("the aborted call: %v", err)
	}
	if !strings.Contains(err.Error(), "RST_STREAM") {
		t.Errorf("the aborted call: %v, want the stream reset", err)
	}
	if res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("the next call: %v %v", res, err)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections: the abort closed the connection", n)
	}
}

func TestAGRPCStatusOutOfRangeIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n  - name: rpc\n    type: http\n    url: http://127.0.0.1:9/\n    loss: {percentage: 1, status: 503, grpc_status: 17}\n")
	for _, args := range [][]string{{"config", "validate", "--config", cfg}, {"serve", "--config", cfg}} {
		r := doppel(t, invocation{args: args})
		out := r.stdout + r.stderr
		if r.code != 1 || !strings.Contains(out, "proxies[0].loss.grpc_status") || !strings.Contains(out, "17 is not a gRPC status code") {
			t.Errorf("doppel %s: exit %d\n%s", args[0], r.code, out)
		}
	}
}
