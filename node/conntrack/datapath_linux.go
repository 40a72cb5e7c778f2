package conntrack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// appctl speaks ovs-vswitchd's control protocol (what ovs-appctl does: one JSON-RPC request
// on its unix socket) for dpctl/dump-conntrack and dpctl/flush-conntrack. Both go through
// the daemon's dpif, so they work for the kernel and the userspace (netdev) datapath alike.
type appctl struct{ rundir string }

func newDatapath(rundir string) (Datapath, error) {
	if rundir == "" {
		return nil, errors.New("conntrack: no OVS run directory")
	}
	return appctl{rundir: rundir}, nil
}

func (a appctl) Dump(ctx context.Context) ([]Conn, error) {
	out, err := a.call(ctx, "dpctl/dump-conntrack")
	if err != nil {
		return nil, err
	}
	return ParseDump(out)
}

func (a appctl) Delete(ctx context.Context, c Conn) error {
	_, err := a.call(ctx, "dpctl/flush-conntrack", c.FlushArgs()...)
	// A full tuple that matches nothing is ENOENT ("failed to flush conntrack (No such
	// file or directory)", OVS 3.1): the entry timed out or was deleted since the dump.
	if err != nil && strings.Contains(err.Error(), "(No such file or directory)") {
		return nil
	}
	return err
}

// socket is ovs-vswitchd's control socket: the fixed name a --unixctl option gives it, else
// the default name with the pid of the running daemon (read again at every call, since
// ovs-vswitchd restarts under a new pid).
func (a appctl) socket() (string, error) {
	fixed := filepath.Join(a.rundir, "ovs-vswitchd.ctl")
	if _, err := os.Stat(fixed); err == nil {
		return fixed, nil
	}
	pid, err := os.ReadFile(filepath.Join(a.rundir, "ovs-vswitchd.pid"))
	if err != nil {
		return "", fmt.Errorf("ovs-vswitchd's control socket: %w", err)
	}
	return filepath.Join(a.rundir, "ovs-vswitchd."+strings.TrimSpace(string(pid))+".ctl"), nil
}

type rpcRequest struct {
	Method string   `json:"method"`
	Params []string `json:"params"`
	ID     int      `json:"id"`
}

type rpcReply struct {
	Result *string         `json:"result"`
	Error  json.RawMessage `json:"error"`
	ID     int             `json:"id"`
}

// call runs one command; ovs-vswitchd answers with a result text or an error text.
func (a appctl) call(ctx context.Context, method string, params ...string) (string, error) {
	path, err := a.socket()
	if err != nil {
		return "", err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", method, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(30 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	if params == nil {
		params = []string{}
	}
	if err := json.NewEncoder(conn).Encode(rpcRequest{Method: method, Params: params}); err != nil {
		return "", fmt.Errorf("%s: %w", method, err)
	}
	var r rpcReply
	if err := json.NewDecoder(conn).Decode(&r); err != nil {
		return "", fmt.Errorf("%s: reading the answer: %w", method, err)
	}
	if len(r.Error) > 0 && string(r.Error) != "null" {
		var text string
		if json.Unmarshal(r.Error, &text) != nil {
			text = string(r.Error)
		}
		return "", fmt.Errorf("%s %s: %s", method, strings.Join(params, " "), strings.TrimSpace(text))
	}
	if r.Result == nil {
		return "", fmt.Errorf("%s: no result", method)
	}
	return *r.Result, nil
}
