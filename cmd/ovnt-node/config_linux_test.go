package main

import (
	"testing"

	"github.com/ovn-transparent/ovn-transparent/internal/contract"
)

func TestNodeConfigOVSRunDir(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "/var/run/openvswitch"},
		{[]string{"--ovs-address", "unix:/tmp/n1/db.sock"}, "/tmp/n1"},
		{[]string{"--ovs-address", "tcp:127.0.0.1:6640"}, contract.OVSRunDir},
		{[]string{"--ovs-address", "unix:/tmp/n1/db.sock", "--ovs-rundir", "/run/ovs"}, "/run/ovs"},
	} {
		cfg, err := parse(t, append([]string{"--node-name", "n1"}, tc.args...)...)
		if err != nil || cfg.OVSRunDir != tc.want {
			t.Errorf("%v: OVS run directory %q (%v), want %q", tc.args, cfg.OVSRunDir, err, tc.want)
		}
	}
}
