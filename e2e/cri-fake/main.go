// cri-fake: a real grpc-go CRI RuntimeService on a unix socket, for grid-wrapper's tests of its
// CRI client. It serves k8s.io/cri-client's fake runtime (k8s.io/cri-api's FakeRuntimeService)
// with the sandboxes of a JSON file, re-read whenever the file changes (checked before each RPC,
// so a test that rewrites the file sees the change on its next call), and appends the full
// method name of every RPC it receives, known or not, to a log file a test can read.
//
//	cri-fake -listen /tmp/x/cri.sock -sandboxes /tmp/x/sandboxes.json -calls /tmp/x/calls.log
//
// The JSON file: [{"id", "name", "namespace", "uid", "attempt", "state": "READY"|"NOTREADY",
// "created_at" (ns), "ip", "additional_ips": [...]}]. It prints "ready <socket>" once serving.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"

	"google.golang.org/grpc"
	kubeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/cri-client/pkg/fake"
)

type sandbox struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	Namespace     string   `json:"namespace"`
	UID           string   `json:"uid"`
	Attempt       uint32   `json:"attempt"`
	State         string   `json:"state"`
	CreatedAt     int64    `json:"created_at"`
	IP            string   `json:"ip"`
	AdditionalIPs []string `json:"additional_ips"`
}

type fileStamp struct {
	size, mtime int64
	ino         uint64
}

type server struct {
	fake      *fake.RemoteRuntime
	sandboxes string
	mu        sync.Mutex
	seen      fileStamp
	calls     *os.File
}

// reload sets the fake's sandboxes from the JSON file when the file changed since the last load.
func (s *server) reload() error {
	fi, err := os.Stat(s.sandboxes)
	if err != nil {
		return err
	}
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	if st == s.seen {
		return nil
	}
	raw, err := os.ReadFile(s.sandboxes)
	if err != nil {
		return err
	}
	var list []sandbox
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("%s: %v", s.sandboxes, err)
	}
	fakes := make([]*apitest.FakePodSandbox, 0, len(list))
	for _, sb := range list {
		state := kubeapi.PodSandboxState_SANDBOX_READY
		if sb.State == "NOTREADY" {
			state = kubeapi.PodSandboxState_SANDBOX_NOTREADY
		}
		status := &apitest.FakePodSandbox{}
		status.Id = sb.ID
		status.Metadata = &kubeapi.PodSandboxMetadata{Name: sb.Name, Uid: sb.UID, Namespace: sb.Namespace, Attempt: sb.Attempt}
		status.State = state
		status.CreatedAt = sb.CreatedAt
		network := &kubeapi.PodSandboxNetworkStatus{Ip: sb.IP}
		for _, ip := range sb.AdditionalIPs {
			network.AdditionalIps = append(network.AdditionalIps, &kubeapi.PodIP{Ip: ip})
		}
		status.Network = network
		fakes = append(fakes, status)
	}
	s.fake.RuntimeService.SetFakeSandboxes(fakes)
	s.seen = st
	return nil
}

func (s *server) record(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// O_APPEND: one write per line, read by the test while the server runs.
	_, _ = s.calls.WriteString(method + "\n")
}

func (s *server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	s.record(info.FullMethod)
	s.mu.Lock()
	err := s.reload()
	s.mu.Unlock()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cri-fake: %v\n", err)
	}
	return handler(ctx, req)
}

func (s *server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	s.record(info.FullMethod)
	return handler(srv, ss)
}

// unknown records a method no service of this server has, and refuses it as grpc-go would.
func (s *server) unknown(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	s.record(method)
	return fmt.Errorf("unknown method %s", method)
}

func main() {
	listen := flag.String("listen", "", "unix socket path to serve on")
	sandboxes := flag.String("sandboxes", "", "JSON file of the sandboxes")
	calls := flag.String("calls", "", "file every RPC's full method name is appended to")
	flag.Parse()
	if *listen == "" || *sandboxes == "" || *calls == "" {
		fmt.Fprintln(os.Stderr, "usage: cri-fake -listen SOCKET -sandboxes FILE.json -calls FILE")
		os.Exit(2)
	}
	callLog, err := os.OpenFile(*calls, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cri-fake:", err)
		os.Exit(1)
	}
	s := &server{fake: fake.NewFakeRemoteRuntime(), sandboxes: *sandboxes, calls: callLog}
	if err := s.reload(); err != nil {
		fmt.Fprintln(os.Stderr, "cri-fake:", err)
		os.Exit(1)
	}
	// The fake's own grpc.Server takes no options; serve its services on one that records.
	g := grpc.NewServer(grpc.UnaryInterceptor(s.unary), grpc.StreamInterceptor(s.stream),
		grpc.UnknownServiceHandler(s.unknown))
	kubeapi.RegisterRuntimeServiceServer(g, s.fake)
	kubeapi.RegisterImageServiceServer(g, s.fake)
	_ = os.Remove(*listen)
	l, err := net.Listen("unix", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cri-fake:", err)
		os.Exit(1)
	}
	fmt.Printf("ready %s\n", *listen)
	if err := g.Serve(l); err != nil {
		fmt.Fprintln(os.Stderr, "cri-fake:", err)
		os.Exit(1)
	}
}
