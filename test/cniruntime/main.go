// Command cniruntime is a container runtime's CNI side built on an older libcni: the one
// containerd 1.6 and 1.7 vendor (github.com/containernetworking/cni v1.1.2), which knows
// results only up to CNI 1.0.0. It loads the network configuration list from a directory
// the way those runtimes do and runs one call of it against the plugins in a directory, so
// the node tests can prove that what the agent installs works with the runtimes people run.
//
// It is its own module so its libcni does not replace the project's newer one.
//
//	cniruntime -conf-dir D -bin-dir B -cache-dir C -netns PATH -container-id ID \
//	    -ifname eth0 -args 'K8S_POD_NAMESPACE=ns;K8S_POD_NAME=name' add|check|del
//
// ADD prints the result as the plugin returned it; every call prints the list's version
// on stderr. A failed call exits with 1 and prints the error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

func main() {
	confDir := flag.String("conf-dir", "", "the runtime's CNI configuration directory")
	binDir := flag.String("bin-dir", "", "the runtime's CNI plugin directory")
	cacheDir := flag.String("cache-dir", "", "libcni's result cache")
	network := flag.String("network", "ovn-transparent", "the network's name in the configuration list")
	netns := flag.String("netns", "", "the sandbox's network namespace path")
	containerID := flag.String("container-id", "", "the sandbox's ID")
	ifName := flag.String("ifname", "eth0", "the interface in the sandbox")
	args := flag.String("args", "", "CNI_ARGS, K=V pairs separated by ';'")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "cniruntime: one command: add, check or del")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *confDir, *binDir, *cacheDir, *network, &libcni.RuntimeConf{
		ContainerID: *containerID, NetNS: *netns, IfName: *ifName, Args: pairs(*args),
	}); err != nil {
		fmt.Fprintln(os.Stderr, "cniruntime:", err)
		os.Exit(1)
	}
}

func run(cmd, confDir, binDir, cacheDir, network string, rt *libcni.RuntimeConf) error {
	list, err := libcni.LoadConfList(confDir, network)
	if err != nil {
		return fmt.Errorf("loading the configuration list: %w", err)
	}
	fmt.Fprintf(os.Stderr, "cniVersion %s\n", list.CNIVersion)
	cni := libcni.NewCNIConfigWithCacheDir([]string{binDir}, cacheDir, nil)
	ctx := context.Background()
	switch cmd {
	case "add":
		res, err := cni.AddNetworkList(ctx, list, rt)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(res)
	case "check":
		return cni.CheckNetworkList(ctx, list, rt)
	case "del":
		return cni.DelNetworkList(ctx, list, rt)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

// pairs splits CNI_ARGS into the runtime configuration's Args.
func pairs(s string) [][2]string {
	var out [][2]string
	for _, kv := range strings.Split(s, ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}
