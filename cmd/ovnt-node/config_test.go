package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp/cliapptest"
)

// parse runs the app's flag handling (config file, environment, command line) and returns
// the configuration its action would see.
func parse(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	return cliapptest.Parse(newApp(), args, configFrom)
}

func TestNodeConfigSources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "node.yaml")
	os.WriteFile(file, []byte("node-name: from-file\nencap-type: stt\nmtu: 1300\n"), 0o644)
	t.Setenv("OVNT_MTU", "1350")
	cfg, err := parse(t, "--config", file, "--encap-ip", "172.18.0.10")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeName != "from-file" || cfg.EncapType != "stt" || cfg.MTU != 1350 || cfg.EncapIP.String() != "172.18.0.10" {
		t.Errorf("got %+v", cfg)
	}
}

func TestNodeConfigRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--encap-type", "vxlan"}, "encap-type"},
		{[]string{"--mtu", "100"}, "mtu"},
		{[]string{"--encap-ip", "300.1.1.1"}, "encap-ip"},
		{[]string{"--node-name", ""}, "node-name"},
		{[]string{"--gateway-resync", "0s"}, "gateway-resync"},
	} {
		if _, err := parse(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error about %q", tc.args, err, tc.want)
		}
	}
}
