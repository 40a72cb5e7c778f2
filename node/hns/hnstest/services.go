package hnstest

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
)

// ovsServices are the Open vSwitch services' command lines on a Windows node: the MSI's,
// and what the windows_node role appends to them (testdata/ovs-services.json says where
// they come from; ansible/ci.sh checks the role renders exactly those).
//
//go:embed testdata/ovs-services.json
var ovsServices []byte

// OVSDBServerArgs returns the options a test's ovsdb-server is started with to serve what
// the ovsdb-server service of a Windows node serves besides its named pipe (which the
// test's own unix socket stands for): the --remote options of the MSI's command line,
// plus the role's in mode ("remote", "remote-plaintext" or "local"; "" for the MSI's
// alone). A TCP listener becomes one on an ephemeral loopback port; TLS options are left
// out (the tests use plain targets). A remote the tests cannot play is an error, so that
// a fixture never serves what the real service does not.
func OVSDBServerArgs(mode string) ([]string, error) {
	var doc struct {
		MSI  map[string]string              `json:"msi"`
		Role map[string]map[string][]string `json:"role"`
	}
	if err := json.Unmarshal(ovsServices, &doc); err != nil {
		return nil, err
	}
	args := splitCommandLine(doc.MSI["ovsdb-server"])
	if mode != "" {
		added, ok := doc.Role[mode]
		if !ok {
			return nil, fmt.Errorf("no role mode %q", mode)
		}
		for _, a := range added["ovsdb-server"] {
			args = append(args, splitCommandLine(a)...)
		}
	}
	var out []string
	for _, a := range args {
		remote, ok := strings.CutPrefix(a, "--remote=")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(remote, "punix:"):
			// The MSI's named pipe: the test server's unix socket.
		case strings.HasPrefix(remote, "ptcp:"):
			out = append(out, "--remote=ptcp:0:127.0.0.1")
		case strings.HasPrefix(remote, "db:"):
			out = append(out, a)
		default:
			return nil, fmt.Errorf("remote %q: not played by the tests", remote)
		}
	}
	return out, nil
}

// splitCommandLine splits a Windows command line whose arguments may be quoted in part
// but hold no escaped quotes (the MSI's and the role's): spaces outside quotes separate,
// quotes are dropped.
func splitCommandLine(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, any := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, any = !quoted, true
		case r == ' ' && !quoted:
			if any {
				out = append(out, cur.String())
			}
			cur.Reset()
			any = false
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if any {
		out = append(out, cur.String())
	}
	return out
}
