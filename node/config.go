package main

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ovn-transparent/ovn-transparent/internal/cliapp"
)

// Config is the node agent's validated configuration.
type Config struct {
	NodeName      string
	Kubeconfig    string
	SBAddress     string
	OVSAddress    string
	EncapType     string // geneve or stt
	EncapIP       netip.Addr
	MTU           int
	CNISocket     string
	CNIBinDir     string
	CNIConfDir    string
	UplinkIface   string
	AnnotationTTL time.Duration // how long ADD waits for the master's pod annotation
}

func flags() []cli.Flag {
	host, _ := os.Hostname()
	return []cli.Flag{
		cliapp.String("node-name", host, "this node's name in Kubernetes"),
		cliapp.String("kubeconfig", "", "kubeconfig file; empty means in-cluster configuration"),
		cliapp.String("sb-address", "", "OVN Southbound remotes for ovn-controller, comma separated"),
		cliapp.String("ovs-address", defaultOVSAddress, "local Open_vSwitch database"),
		cliapp.String("encap-type", "geneve", "tunnel encapsulation: geneve, or stt (needs an OVS build up to 3.5)"),
		cliapp.String("encap-ip", "", "tunnel endpoint address; empty means the node's InternalIP"),
		cliapp.Int("mtu", 1400, "pod interface MTU (the underlay's minus the tunnel overhead)"),
		cliapp.String("cni-socket", defaultCNISocket, "where the CNI plugin reaches this agent"),
		cliapp.String("cni-bin-dir", defaultCNIBinDir, "where the CNI plugin binary is installed"),
		cliapp.String("cni-conf-dir", defaultCNIConfDir, "where the CNI network configuration is written"),
		cliapp.String("uplink-interface", "", "interface to the physical network, moved into the gateway bridge"),
		cliapp.Duration("pod-annotation-timeout", 30*time.Second, "how long CNI ADD waits for the master to annotate the pod"),
	}
}

// configFrom reads and validates the flags.
func configFrom(c *cli.Context) (Config, error) {
	cfg := Config{
		NodeName:      c.String("node-name"),
		Kubeconfig:    c.String("kubeconfig"),
		SBAddress:     c.String("sb-address"),
		OVSAddress:    c.String("ovs-address"),
		EncapType:     c.String("encap-type"),
		MTU:           c.Int("mtu"),
		CNISocket:     c.String("cni-socket"),
		CNIBinDir:     c.String("cni-bin-dir"),
		CNIConfDir:    c.String("cni-conf-dir"),
		UplinkIface:   c.String("uplink-interface"),
		AnnotationTTL: c.Duration("pod-annotation-timeout"),
	}
	if s := c.String("encap-ip"); s != "" {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return Config{}, fmt.Errorf("--encap-ip %q: %w", s, err)
		}
		cfg.EncapIP = ip
	}
	return cfg, cfg.validate()
}

func (c Config) validate() error {
	switch {
	case c.NodeName == "":
		return fmt.Errorf("--node-name is empty")
	case c.EncapType != "geneve" && c.EncapType != "stt":
		return fmt.Errorf("--encap-type %q: must be geneve or stt", c.EncapType)
	case c.MTU < 576 || c.MTU > 9000:
		return fmt.Errorf("--mtu %d: must be between 576 and 9000", c.MTU)
	case c.AnnotationTTL <= 0:
		return fmt.Errorf("--pod-annotation-timeout %s: must be positive", c.AnnotationTTL)
	}
	return nil
}
