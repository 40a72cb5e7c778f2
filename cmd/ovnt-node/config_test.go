package main

import (
	"fmt"
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

// The external IP policy's inputs: none allowed unless given, the join subnet's default the
// master's, and the environment as the manifests give them (OVNT_ALLOWED_EXTERNAL_IP_CIDRS).
func TestNodeConfigExternalIPPolicy(t *testing.T) {
	cfg, err := parse(t, "--node-name", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.AllowedExternalIPs) != 0 || cfg.JoinSubnet.String() != "100.64.0.0/16" {
		t.Errorf("defaults: allowed %v, join %s", cfg.AllowedExternalIPs, cfg.JoinSubnet)
	}
	t.Setenv("OVNT_ALLOWED_EXTERNAL_IP_CIDRS", "192.0.2.0/24, 198.51.100.0/24")
	if cfg, err = parse(t, "--node-name", "n1"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cfg.AllowedExternalIPs) != "[192.0.2.0/24 198.51.100.0/24]" {
		t.Errorf("allowed %v", cfg.AllowedExternalIPs)
	}
}

func TestNodeConfigRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--encap-type", "vxlan"}, "encap-type"},
		{[]string{"--sb-probe-interval", "500ms"}, "sb-probe-interval"},
		{[]string{"--mtu", "100"}, "mtu"},
		{[]string{"--encap-ip", "300.1.1.1"}, "encap-ip"},
		{[]string{"--node-name", ""}, "node-name"},
		{[]string{"--gateway-resync", "0s"}, "gateway-resync"},
		{[]string{"--cluster-cidr", "10.244.1.0/16"}, "host bits set"},
		{[]string{"--service-cidr", "10.244.128.0/20"}, "overlaps"},
		{[]string{"--cluster-cidr", "fd00::/48"}, "IPv4"},
		{[]string{"--cluster-cidr", ""}, "cluster-cidr"},
		{[]string{"--allowed-external-ip-cidrs", "192.0.2.1/24"}, "host bits set"},
		{[]string{"--allowed-external-ip-cidrs", "fd00::/64"}, "IPv4"},
		{[]string{"--join-subnet", "fd00::/64"}, "IPv4"},
		// What the master must agree with is internal/contract's, not a flag.
		{[]string{"--physical-network", "ext"}, "physical-network"},
		{[]string{"--nodeport-gr-ip", "169.254.100.2"}, "nodeport-gr-ip"},
		{[]string{"--sb-client-cert", "/pki/node1-cert.pem"}, "go together"},
		{[]string{"--sb-client-cert", "/c.pem", "--sb-client-key", "/k.pem"}, "go together"},
	} {
		if _, err := parse(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error about %q", tc.args, err, tc.want)
		}
	}
}

// TestNodeConfigClusterNetworks: the cluster and service ranges are comma lists, parsed and
// checked by contract.ParseClusterNetworks as the master's are.
func TestNodeConfigClusterNetworks(t *testing.T) {
	cfg, err := parse(t, "--cluster-cidr", "10.244.0.0/16, 10.245.0.0/16", "--service-cidr", "10.96.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cfg.ClusterCIDRs) != "[10.244.0.0/16 10.245.0.0/16]" || fmt.Sprint(cfg.ServiceCIDRs) != "[10.96.0.0/16]" {
		t.Errorf("got %v and %v", cfg.ClusterCIDRs, cfg.ServiceCIDRs)
	}
}

func TestNodeConfigSBTLS(t *testing.T) {
	cfg, err := parse(t, "--sb-address", "ssl:192.0.2.20:6642", "--sb-client-cert", "/pki/c.pem",
		"--sb-client-key", "/pki/k.pem", "--sb-ca-cert", "/pki/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SBClientCert != "/pki/c.pem" || cfg.SBClientKey != "/pki/k.pem" || cfg.SBCACert != "/pki/ca.pem" {
		t.Errorf("%+v", cfg)
	}
}

// M5: the node refuses the Services the master refuses: the same flags and defaults.
func TestNodeConfigServiceLimits(t *testing.T) {
	cfg, err := parse(t, "--node-name", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ServiceLimits.PerService != 2000 || cfg.ServiceLimits.PerNamespace != 20000 {
		t.Errorf("defaults: %+v", cfg.ServiceLimits)
	}
	if _, err := parse(t, "--node-name", "n1", "--max-namespace-frontends", "-1"); err == nil {
		t.Error("a negative limit was accepted")
	}
}
