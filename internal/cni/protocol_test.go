package cni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// serve runs h on a unix socket in a temporary directory and returns a client for it.
func serve(t *testing.T, h Handler) (*Client, string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("AF_UNIX in a temporary directory is not available everywhere on Windows")
	}
	path := filepath.Join(t.TempDir(), "cni.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return NewClient(func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}), path
}

func TestRoundTrip(t *testing.T) {
	var got Request
	c, _ := serve(t, func(ctx context.Context, req Request) ([]byte, error) {
		got = req
		switch req.Command {
		case "ADD":
			return []byte(`{"cniVersion":"1.1.0"}`), nil
		case "DEL":
			return nil, nil
		case "CHECK":
			return nil, fmt.Errorf("CHECK pod ns/p: %w", types.NewError(types.ErrTryAgainLater, "later", ""))
		default:
			return nil, errors.New("boom")
		}
	})
	req := Request{Command: "ADD", ContainerID: "c1", Netns: "/run/netns/x", IfName: "eth0",
		Args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p", Path: "/opt/cni/bin", StdinData: []byte(`{"cniVersion":"1.1.0","name":"n"}`)}
	out, err := c.Do(context.Background(), req)
	if err != nil || string(out) != `{"cniVersion":"1.1.0"}` {
		t.Fatalf("ADD: %q %v", out, err)
	}
	if got.ContainerID != "c1" || got.Netns != req.Netns || got.IfName != "eth0" || got.Args != req.Args ||
		got.Path != req.Path || string(got.StdinData) != string(req.StdinData) {
		t.Errorf("server got %+v, sent %+v", got, req)
	}
	if out, err := c.Do(context.Background(), Request{Command: "DEL", StdinData: []byte(`{}`)}); err != nil || len(out) != 0 {
		t.Errorf("DEL: %q %v", out, err)
	}
	_, err = c.Do(context.Background(), Request{Command: "CHECK", StdinData: []byte(`{}`)})
	var cerr *types.Error
	if !errors.As(err, &cerr) || cerr.Code != types.ErrTryAgainLater || cerr.Msg != "CHECK pod ns/p: later" {
		t.Errorf("CHECK: %#v, want code 11 with the wrapped message", err)
	}
	_, err = c.Do(context.Background(), Request{Command: "GC", StdinData: []byte(`{}`)})
	if !errors.As(err, &cerr) || cerr.Code != types.ErrInternal || cerr.Msg != "boom" {
		t.Errorf("GC: %#v, want code 999", err)
	}
}

func TestUnreachable(t *testing.T) {
	c := NewClient(func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(t.TempDir(), "none.sock"))
	})
	if _, err := c.Do(context.Background(), Request{Command: "STATUS"}); !errors.Is(err, ErrUnreachable) {
		t.Errorf("got %v, want ErrUnreachable", err)
	}
}

func TestParsePodArgs(t *testing.T) {
	p, err := ParsePodArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u-1")
	if err != nil || p != (PodArgs{Namespace: "ns", Name: "web-0", UID: "u-1"}) || p.String() != "ns/web-0" {
		t.Errorf("got %+v %v", p, err)
	}
	for _, bad := range []string{"", "K8S_POD_NAME=x", "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=x;junk"} {
		if _, err := ParsePodArgs(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
