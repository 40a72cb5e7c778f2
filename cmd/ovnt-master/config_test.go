package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp/cliapptest"
	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
)

// parse runs the app's flag handling (config file, environment, command line) and returns
// the configuration its action would see.
func parse(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	return cliapptest.Parse(newApp(), args, configFrom)
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClusterCIDR.String() != "10.244.0.0/16" || cfg.NodeSubnetBits != 24 || cfg.JoinSubnet.String() != "100.64.0.0/16" {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "master.yaml")
	os.WriteFile(file, []byte("cluster-cidr: 10.128.0.0/14\nnode-subnet-prefix: 23\njoin-subnet: 100.64.0.0/16\n"), 0o644)
	t.Setenv("OVNT_NODE_SUBNET_PREFIX", "25")
	cfg, err := parse(t, "--config", file, "--join-subnet", "100.65.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClusterCIDR.String() != "10.128.0.0/14" {
		t.Errorf("cluster CIDR from the file: got %s", cfg.ClusterCIDR)
	}
	if cfg.NodeSubnetBits != 25 {
		t.Errorf("the environment must override the file: got /%d", cfg.NodeSubnetBits)
	}
	if cfg.JoinSubnet.String() != "100.65.0.0/16" {
		t.Errorf("the command line must override the file: got %s", cfg.JoinSubnet)
	}
}

func TestConfigRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster-cidr", "10.244.0.0/33"}, "cluster-cidr"},
		{[]string{"--cluster-cidr", "10.244.1.0/16"}, "host bits set"},
		{[]string{"--join-subnet", "10.244.128.0/20"}, "overlaps"},
		{[]string{"--cluster-cidr", "10.244.0.0/16,10.245.0.0/16"}, "one prefix"},
		{[]string{"--service-cidr", "10.244.0.0/20"}, "overlaps"},
		{[]string{"--allowed-external-ip-cidrs", "192.0.2.0/33"}, "allowed-external-ip-cidrs"},
		{[]string{"--control-plane-addresses", "192.0.2.20/24"}, "host bits set"},
		{[]string{"--control-plane-addresses", "2001:db8::1"}, "only IPv4"},
		{[]string{"--control-plane-addresses", "central"}, "control-plane-addresses"},
		{[]string{"--control-plane-ports", "6641,70000"}, "not a port"},
		{[]string{"--control-plane-ports", ""}, "control-plane-ports is empty"},
		{[]string{"--allowed-external-ip-cidrs", "fd00::/64"}, "IPv4"},
		{[]string{"--node-subnet-prefix", "16"}, "node-subnet-prefix"},
		{[]string{"--node-subnet-prefix", "31"}, "node-subnet-prefix"},
		{[]string{"--nb-address", ""}, "nb-address"},
		{[]string{"--kube-api-qps", "0"}, "kube-api-qps"},
		{[]string{"--kube-api-qps", "50", "--kube-api-burst", "10"}, "kube-api-burst"},
		{[]string{"--node-subnet-prefix", "30"}, "node-subnet-prefix"},
		{[]string{"--cluster-cidr", "fd00::/48", "--node-subnet-prefix", "64"}, "IPv4"},
		{[]string{"--join-subnet", "100.64.0.0/31"}, "join-subnet"},
		{[]string{"--leader-elect-name", ""}, "leader-elect"},
		{[]string{"--workers", "0"}, "workers"},
		{[]string{"--sync-timeout", "0s"}, "sync-timeout"},
		{[]string{"--nb-inactivity-probe", "-1s"}, "nb-inactivity-probe"},
	} {
		_, err := parse(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got error %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
	if _, err := parse(t, "--config", "/nonexistent/master.yaml"); err == nil {
		t.Error("a missing config file was accepted")
	}
}

func TestConfigLeaderElectionAndLogging(t *testing.T) {
	cfg, err := parse(t, "--leader-elect-namespace", "ovn-transparent", "--leader-elect-name", "m", "--log-level", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.LeaderElect || cfg.LeaderElectNamespace != "ovn-transparent" || cfg.LeaderElectName != "m" || cfg.Verbosity != 2 || cfg.Workers != 4 ||
		cfg.SyncTimeout != 30*time.Second || cfg.NBInactivityProbe != 10*time.Second {
		t.Errorf("%+v", cfg)
	}
	if _, err := parse(t, "--leader-elect=false", "--leader-elect-name", ""); err != nil {
		t.Errorf("no Lease name is fine without leader election: %v", err)
	}
}

func TestVersionCommand(t *testing.T) {
	app := newApp()
	var out bytes.Buffer
	app.Writer = &out
	if err := app.Run([]string{"ovnt-master", "version"}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "ovnt-master ") {
		t.Errorf("version output %q", out.String())
	}
}

func TestConfigControlPlane(t *testing.T) {
	cfg, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.ControlPlaneAddresses) != 0 || fmt.Sprint(cfg.ControlPlanePorts) != "[6641 6642 6643 6644]" {
		t.Errorf("defaults: addresses %v ports %v", cfg.ControlPlaneAddresses, cfg.ControlPlanePorts)
	}
	cfg, err = parse(t, "--control-plane-addresses", "192.0.2.20, 198.51.100.0/28", "--control-plane-ports", "6641,6642")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cfg.ControlPlaneAddresses) != "[192.0.2.20/32 198.51.100.0/28]" || fmt.Sprint(cfg.ControlPlanePorts) != "[6641 6642]" {
		t.Errorf("addresses %v ports %v", cfg.ControlPlaneAddresses, cfg.ControlPlanePorts)
	}
}

func TestConfigNBTLS(t *testing.T) {
	cfg, err := parse(t, "--nb-address", "ssl:192.0.2.20:6641", "--nb-client-cert", "/pki/c.pem",
		"--nb-client-key", "/pki/k.pem", "--nb-ca-cert", "/pki/ca.pem", "--nb-server-name", "ovn-central")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NBClientCert != "/pki/c.pem" || cfg.NBClientKey != "/pki/k.pem" || cfg.NBCACert != "/pki/ca.pem" || cfg.NBServerName != "ovn-central" {
		t.Errorf("%+v", cfg)
	}
}

// M5: the Service limits are on by default and the operator's to change.
func TestConfigServiceLimits(t *testing.T) {
	cfg, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if want := (svcmodel.Limits{PerService: 2000, PerNamespace: 20000, PerNamespaceEntryPoints: 2000, PerNamespaceVIPs: 100000}); cfg.ServiceLimits != want ||
		cfg.MaxServiceVIPs != 50000 || cfg.MaxPolicySize != 5000 {
		t.Errorf("defaults: %+v, %d VIPs, policy size %d", cfg.ServiceLimits, cfg.MaxServiceVIPs, cfg.MaxPolicySize)
	}
	cfg, err = parse(t, "--max-service-frontends", "0", "--max-namespace-frontends", "10", "--max-service-vips", "7",
		"--max-namespace-entry-points", "3", "--max-namespace-vips", "0")
	if want := (svcmodel.Limits{PerNamespace: 10, PerNamespaceEntryPoints: 3}); err != nil || cfg.ServiceLimits != want || cfg.MaxServiceVIPs != 7 {
		t.Errorf("set: %+v, %d VIPs, %v", cfg.ServiceLimits, cfg.MaxServiceVIPs, err)
	}
	if _, err := parse(t, "--max-namespace-vips", "-1"); err == nil {
		t.Error("a negative VIP limit was accepted")
	}
	if _, err := parse(t, "--max-policy-size", "-1"); err == nil {
		t.Error("a negative policy size was accepted")
	}
	if _, err := parse(t, "--max-service-vips", "-1"); err == nil {
		t.Error("a negative limit was accepted")
	}
}
