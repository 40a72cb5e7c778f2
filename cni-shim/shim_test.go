package cnishim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

// agent is a fake node agent on a unix socket: it records every request and answers with
// answer.
type agent struct {
	socket string
	mu     sync.Mutex
	got    []cni.Request
	answer func(cni.Request) ([]byte, error)
}

func newAgent(t *testing.T, answer func(cni.Request) ([]byte, error)) *agent {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("AF_UNIX in a temporary directory is not available everywhere on Windows")
	}
	a := &agent{socket: filepath.Join(t.TempDir(), "cni.sock"), answer: answer}
	ln, err := net.Listen("unix", a.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := cni.NewServer(func(_ context.Context, req cni.Request) ([]byte, error) {
		a.mu.Lock()
		a.got = append(a.got, req)
		a.mu.Unlock()
		return a.answer(req)
	})
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return a
}

func (a *agent) requests() []cni.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]cni.Request(nil), a.got...)
}

func conf(socket string) []byte {
	if socket == "" {
		return []byte(`{"cniVersion":"1.1.0","name":"ovn-transparent","type":"ovnt-cni"}`)
	}
	return []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"ovn-transparent","type":"ovnt-cni","socket":%q}`, socket))
}

// Every command reaches the agent with the runtime's arguments unchanged, and the agent's
// answer is printed as it came.
func TestForwardEveryCommand(t *testing.T) {
	a := newAgent(t, func(req cni.Request) ([]byte, error) {
		if req.Command == "ADD" {
			return []byte(`{"cniVersion":"1.1.0","ips":[{"address":"10.244.1.5/24"}]}`), nil
		}
		return nil, nil
	})
	stdin := conf(a.socket)
	args := &skel.CmdArgs{ContainerID: "sandbox-1", Netns: "/var/run/netns/cni-1", IfName: "eth0",
		Args: "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0", Path: "/opt/cni/bin", StdinData: stdin}
	var out bytes.Buffer
	funcs := Plugin{Out: &out}.Funcs()
	calls := []struct {
		command string
		f       func(*skel.CmdArgs) error
	}{{"ADD", funcs.Add}, {"CHECK", funcs.Check}, {"DEL", funcs.Del}, {"GC", funcs.GC}, {"STATUS", funcs.Status}}
	var want []cni.Request
	for _, c := range calls {
		if err := c.f(args); err != nil {
			t.Fatalf("%s: %v", c.command, err)
		}
		want = append(want, cni.Request{Command: c.command, ContainerID: "sandbox-1", Netns: "/var/run/netns/cni-1",
			IfName: "eth0", Args: "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0", Path: "/opt/cni/bin", StdinData: stdin})
	}
	if got := a.requests(); !reflect.DeepEqual(got, want) {
		t.Errorf("the agent got\n%+v\nwant\n%+v", got, want)
	}
	if got, want := out.String(), `{"cniVersion":"1.1.0","ips":[{"address":"10.244.1.5/24"}]}`; got != want {
		t.Errorf("printed %q, want the ADD result only: %q", got, want)
	}
}

// An error the agent answers with comes back as the same CNI error, and nothing is printed.
func TestForwardAgentError(t *testing.T) {
	a := newAgent(t, func(cni.Request) ([]byte, error) {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "pod default/web-0 has no address yet", "details")
	})
	var out bytes.Buffer
	err := Plugin{Out: &out}.Forward(context.Background(), "ADD", &skel.CmdArgs{ContainerID: "c", StdinData: conf(a.socket)})
	var cerr *types.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("got %v (%T), want a *types.Error", err, err)
	}
	want := types.Error{Code: types.ErrInvalidNetworkConfig, Msg: "pod default/web-0 has no address yet", Details: "details"}
	if *cerr != want {
		t.Errorf("got %+v, want %+v", *cerr, want)
	}
	if out.Len() != 0 {
		t.Errorf("printed %q on an error", out.String())
	}
}

// An agent that cannot be reached is "try again later" (11), except for STATUS, which must
// say "not available" (50) so that the runtime reports the network as not ready.
func TestForwardAgentUnreachable(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("AF_UNIX in a temporary directory is not available everywhere on Windows")
	}
	socket := filepath.Join(t.TempDir(), "absent.sock")
	want := map[string]uint{"ADD": types.ErrTryAgainLater, "DEL": types.ErrTryAgainLater,
		"CHECK": types.ErrTryAgainLater, "GC": types.ErrTryAgainLater, "STATUS": types.ErrPluginNotAvailable}
	for command, code := range want {
		err := Plugin{}.Forward(context.Background(), command, &skel.CmdArgs{StdinData: conf(socket)})
		var cerr *types.Error
		if !errors.As(err, &cerr) {
			t.Fatalf("%s: got %v (%T), want a *types.Error", command, err, err)
		}
		if cerr.Code != code || cerr.Msg != "ovnt-node is not reachable at "+socket {
			t.Errorf("%s: got code %d %q, want code %d naming the socket", command, cerr.Code, cerr.Msg, code)
		}
	}
}

// Without a socket in the configuration, the plugin dials the contract's default.
func TestForwardDefaultSocket(t *testing.T) {
	var dialed []string
	p := Plugin{Dial: func(_ context.Context, path string) (net.Conn, error) {
		dialed = append(dialed, path)
		return nil, errors.New("refused")
	}}
	err := p.Forward(context.Background(), "DEL", &skel.CmdArgs{StdinData: conf("")})
	var cerr *types.Error
	if !errors.As(err, &cerr) || cerr.Code != types.ErrTryAgainLater {
		t.Fatalf("got %v, want code %d", err, types.ErrTryAgainLater)
	}
	if want := []string{contract.CNISocket}; !reflect.DeepEqual(dialed, want) {
		t.Errorf("dialed %q, want %q", dialed, want)
	}
}

// A configuration that is not JSON is a decoding error, and the agent is not called.
func TestForwardBadConfiguration(t *testing.T) {
	p := Plugin{Dial: func(context.Context, string) (net.Conn, error) {
		t.Error("dialed the agent for a configuration that does not decode")
		return nil, errors.New("no")
	}}
	err := p.Forward(context.Background(), "ADD", &skel.CmdArgs{StdinData: []byte(`{"cniVersion":`)})
	var cerr *types.Error
	if !errors.As(err, &cerr) || cerr.Code != types.ErrDecodingFailure {
		t.Fatalf("got %v, want code %d", err, types.ErrDecodingFailure)
	}
}

// mainEnv makes the test binary run Main instead of the tests (TestMain), so that Main is
// tested as the runtime runs it: environment, stdin, stdout and exit status.
const mainEnv = "OVNT_CNI_SHIM_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		Main("ovnt-cni test")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runMain(t *testing.T, env []string, stdin []byte) (stdout []byte, exit int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), mainEnv+"=1"), env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		exit = exitErr.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.Bytes(), exit
}

// Main answers VERSION itself, forwards ADD, prints the result and exits 0, and prints a CNI
// error and exits 1 when the agent cannot be reached.
func TestMainAsTheRuntimeRunsIt(t *testing.T) {
	a := newAgent(t, func(cni.Request) ([]byte, error) {
		return []byte(`{"cniVersion":"1.1.0"}`), nil
	})
	out, exit := runMain(t, []string{"CNI_COMMAND=VERSION"}, conf(a.socket))
	var version struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(out, &version); err != nil || exit != 0 {
		t.Fatalf("VERSION: exit %d, output %q: %v", exit, out, err)
	}
	if !reflect.DeepEqual(version.SupportedVersions, cni.SupportedVersions) {
		t.Errorf("VERSION lists %q, want %q", version.SupportedVersions, cni.SupportedVersions)
	}
	if n := len(a.requests()); n != 0 {
		t.Errorf("VERSION reached the agent (%d requests)", n)
	}

	add := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=sandbox-1", "CNI_NETNS=/var/run/netns/cni-1",
		"CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin", "CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0"}
	out, exit = runMain(t, add, conf(a.socket))
	if exit != 0 || string(out) != `{"cniVersion":"1.1.0"}` {
		t.Errorf("ADD: exit %d, output %q", exit, out)
	}
	if got := a.requests(); len(got) != 1 || got[0].Command != "ADD" || got[0].ContainerID != "sandbox-1" {
		t.Errorf("the agent got %+v, want one ADD of sandbox-1", got)
	}

	absent := filepath.Join(t.TempDir(), "absent.sock")
	out, exit = runMain(t, add, conf(absent))
	var cerr types.Error
	if err := json.Unmarshal(out, &cerr); err != nil || exit != 1 {
		t.Fatalf("ADD without the agent: exit %d, output %q: %v", exit, out, err)
	}
	if cerr.Code != types.ErrTryAgainLater || cerr.Msg != "ovnt-node is not reachable at "+absent {
		t.Errorf("ADD without the agent printed %+v, want code %d naming %s", cerr, types.ErrTryAgainLater, absent)
	}
}
