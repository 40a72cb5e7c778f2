package main

import (
	"strings"
	"testing"
)

func TestNodeConfigListeners(t *testing.T) {
	cfg, err := parse(t, "--node-name", "w1", "--ovsdb-listen", "pssl:6640", "--openflow-listen", "pssl:6653:10.0.0.5")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OVSDBListen != "pssl:6640" || cfg.OpenFlowListen != "pssl:6653:10.0.0.5" {
		t.Errorf("got %q %q", cfg.OVSDBListen, cfg.OpenFlowListen)
	}
	if _, err := parse(t, "--node-name", "w1", "--ovsdb-listen", "ptcp:6640", "--openflow-listen", "ptcp:6653", "--listen-plaintext"); err != nil {
		t.Errorf("plain TCP the operator allowed: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ovsdb-listen", "pssl:6640"}, "go together"},
		{[]string{"--ovn-bridge-remote"}, "needs --openflow-listen"},
		{[]string{"--openflow-listen", "pssl:6653"}, "go together"},
		{[]string{"--ovsdb-listen", "ptcp:6640", "--openflow-listen", "pssl:6653"}, "--listen-plaintext"},
		{[]string{"--ovsdb-listen", "ssl:1.2.3.4:6640", "--openflow-listen", "pssl:6653"}, "want pssl:PORT"},
		{[]string{"--ovsdb-listen", "pssl:x", "--openflow-listen", "pssl:6653"}, "want pssl:PORT"},
		{[]string{"--ovsdb-listen", "pssl:6640", "--openflow-listen", "pssl:6653",
			"--sb-client-cert", "c", "--sb-client-key", "k", "--sb-ca-cert", "ca"}, "remote ovn-controller"},
	} {
		_, err := parse(t, append([]string{"--node-name", "w1"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error about %q", tc.args, err, tc.want)
		}
	}
}

// The relay refuses what it cannot do safely before it listens.
func TestRelayFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--node-address"},
		{[]string{"--node-address", "10.0.0.5"}, "PrivateKeyFile"},
		{[]string{"--node-address", "10.0.0.5", "--client-cert", "/none.crt", "--client-key", "/none.key", "--ca-cert", "/none-ca.crt"}, "none.crt"},
		{[]string{"--node-address", "10.0.0.5", "--allow-plaintext", "--ovsdb-port", "0"}, "not a port"},
	} {
		err := newApp().Run(append([]string{"ovnt-node", "chassis-relay", "--rundir", t.TempDir()}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error about %q", tc.args, err, tc.want)
		}
	}
}

// remote-controllers refuses unusable flags, and a missing kubeconfig, before it watches
// anything.
func TestRemoteControllersFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cert-dir", ""}, "--cert-dir is empty"},
		{[]string{"--ovsdb-port", "0"}, "--ovsdb-port 0: not a port"},
		{[]string{"--openflow-port", "70000"}, "--openflow-port 70000: not a port"},
		{[]string{"--kubeconfig", "/none/kubeconfig"}, "kubeconfig"},
	} {
		err := newApp().Run(append([]string{"ovnt-node", "remote-controllers", "--rundir", t.TempDir()}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error about %q", tc.args, err, tc.want)
		}
	}
}
