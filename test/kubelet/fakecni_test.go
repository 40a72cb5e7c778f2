//go:build linux

package kubelet_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"golang.org/x/sys/unix"
)

// The fake CNI plugin is this test binary itself: TestMain runs fakeCNIMain when the kubelet
// executes it as a plugin (CNI_COMMAND set), so it is built, vetted and versioned with the
// test, and every kubelet call goes through a real exec, as with the real plugin.
//
// It gives the pod a veth whose host side stays in the namespace the plugin runs in (the
// node's), a /32 from the configured subnet, a route to the pod from the node and a default
// route in the pod via 169.254.1.1, the link-local gateway on every host-side veth. Its
// state lives in stateDir: the next address, one file per attachment, and calls.jsonl (one
// line per call, for the tests to read). Files fail-add and fail-status in stateDir make ADD
// and STATUS fail with the file's content.
const fakeCNIType = "ovnt-fake-cni"

type fakeConf struct {
	types.PluginConf
	StateDir string `json:"stateDir"`
	Subnet   string `json:"subnet"`
	NodeIP   string `json:"nodeIP"`
	// What libcni injects into a GC call.
	ValidAttachments []types.GCAttachment `json:"cni.dev/valid-attachments"`
}

// fakeCall is one line of calls.jsonl.
type fakeCall struct {
	Cmd         string   `json:"cmd"`
	ContainerID string   `json:"containerID,omitempty"`
	Netns       string   `json:"netns,omitempty"`
	IfName      string   `json:"ifName,omitempty"`
	Args        string   `json:"args,omitempty"`
	Valid       []string `json:"valid,omitempty"` // GC: valid container IDs
}

const fakeGateway = "169.254.1.1"

func fakeCNIMain() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    func(a *skel.CmdArgs) error { return fakeRun("ADD", a, fakeAdd) },
		Del:    func(a *skel.CmdArgs) error { return fakeRun("DEL", a, fakeDel) },
		Check:  func(a *skel.CmdArgs) error { return fakeRun("CHECK", a, fakeCheck) },
		GC:     func(a *skel.CmdArgs) error { return fakeRun("GC", a, fakeGC) },
		Status: func(a *skel.CmdArgs) error { return fakeRun("STATUS", a, fakeStatus) },
	}, version.PluginSupports("1.0.0", "1.1.0"), "ovnt-fake-cni (kubelet tests)")
	os.Exit(0)
}

// fakeRun parses the configuration, serializes calls on a lock file, records the call and
// runs it.
func fakeRun(cmd string, a *skel.CmdArgs, fn func(*fakeConf, *skel.CmdArgs) error) error {
	var conf fakeConf
	if err := json.Unmarshal(a.StdinData, &conf); err != nil {
		return types.NewError(types.ErrDecodingFailure, "bad configuration", err.Error())
	}
	lock, err := os.OpenFile(filepath.Join(conf.StateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	call := fakeCall{Cmd: cmd, ContainerID: a.ContainerID, Netns: a.Netns, IfName: a.IfName, Args: a.Args}
	for _, v := range conf.ValidAttachments {
		call.Valid = append(call.Valid, v.ContainerID)
	}
	line, _ := json.Marshal(call)
	f, err := os.OpenFile(filepath.Join(conf.StateDir, "calls.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	f.Write(append(line, '\n'))
	f.Close()
	return fn(&conf, a)
}

func fakeHostVeth(containerID string) string { return "vf" + containerID[:12] }

func fakeAdd(conf *fakeConf, a *skel.CmdArgs) error {
	if msg, err := os.ReadFile(filepath.Join(conf.StateDir, "fail-add")); err == nil {
		return types.NewError(types.ErrTryAgainLater, strings.TrimSpace(string(msg)), "")
	}
	ip, err := fakeAllocate(conf, a.ContainerID)
	if err != nil {
		return err
	}
	host, podNS := fakeHostVeth(a.ContainerID), filepath.Base(a.Netns)
	route := []string{"route", "replace", ip.String() + "/32", "dev", host}
	if conf.NodeIP != "" {
		route = append(route, "src", conf.NodeIP) // so the pod sees the node IP as the client
	}
	for _, c := range [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", a.IfName, "netns", podNS},
		{"addr", "add", fakeGateway + "/32", "dev", host},
		{"link", "set", host, "up"},
		route,
		{"-n", podNS, "addr", "add", ip.String() + "/32", "dev", a.IfName},
		{"-n", podNS, "link", "set", a.IfName, "up"},
		{"-n", podNS, "route", "add", fakeGateway, "dev", a.IfName, "scope", "link"},
		{"-n", podNS, "route", "add", "default", "via", fakeGateway, "dev", a.IfName},
	} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	res := &current.Result{
		CNIVersion: conf.CNIVersion,
		Interfaces: []*current.Interface{{Name: host}, {Name: a.IfName, Sandbox: a.Netns}},
		IPs: []*current.IPConfig{{
			Interface: current.Int(1),
			Address:   net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)},
			Gateway:   net.ParseIP(fakeGateway),
		}},
	}
	return types.PrintResult(res, conf.CNIVersion)
}

// fakeAllocate gives containerID the next address of the subnet (the same one again on a
// repeated ADD) and records it in ipam/<containerID>.
func fakeAllocate(conf *fakeConf, containerID string) (netip.Addr, error) {
	dir := filepath.Join(conf.StateDir, "ipam")
	os.MkdirAll(dir, 0o755)
	if b, err := os.ReadFile(filepath.Join(dir, containerID)); err == nil {
		return netip.ParseAddr(string(b))
	}
	prefix, err := netip.ParsePrefix(conf.Subnet)
	if err != nil {
		return netip.Addr{}, err
	}
	next := 2
	if b, err := os.ReadFile(filepath.Join(conf.StateDir, "next")); err == nil {
		next, _ = strconv.Atoi(string(b))
	}
	ip := prefix.Masked().Addr()
	for range next {
		ip = ip.Next()
	}
	if !prefix.Contains(ip) {
		return netip.Addr{}, types.NewError(types.ErrTryAgainLater, "subnet "+conf.Subnet+" exhausted", "")
	}
	os.WriteFile(filepath.Join(conf.StateDir, "next"), []byte(strconv.Itoa(next+1)), 0o644)
	return ip, os.WriteFile(filepath.Join(dir, containerID), []byte(ip.String()), 0o644)
}

// fakeRelease deletes the attachment's host veth (which takes the pod side with it) and its
// address; it is idempotent, as DEL must be.
func fakeRelease(conf *fakeConf, containerID string) error {
	out, err := exec.Command("ip", "link", "del", fakeHostVeth(containerID)).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "Cannot find device") {
		return fmt.Errorf("ip link del: %v: %s", err, out)
	}
	if err := os.Remove(filepath.Join(conf.StateDir, "ipam", containerID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func fakeDel(conf *fakeConf, a *skel.CmdArgs) error { return fakeRelease(conf, a.ContainerID) }

func fakeCheck(conf *fakeConf, a *skel.CmdArgs) error {
	b, err := os.ReadFile(filepath.Join(conf.StateDir, "ipam", a.ContainerID))
	if err != nil {
		return fmt.Errorf("no attachment for container %s", a.ContainerID)
	}
	out, err := exec.Command("ip", "-n", filepath.Base(a.Netns), "-o", "addr", "show", "dev", a.IfName).CombinedOutput()
	if err != nil || !strings.Contains(string(out), " "+string(b)+"/32 ") {
		return fmt.Errorf("%s in %s does not have %s: %v %s", a.IfName, a.Netns, b, err, out)
	}
	return nil
}

func fakeGC(conf *fakeConf, a *skel.CmdArgs) error {
	valid := map[string]bool{}
	for _, v := range conf.ValidAttachments {
		valid[v.ContainerID] = true
	}
	entries, _ := os.ReadDir(filepath.Join(conf.StateDir, "ipam"))
	var errs []error
	for _, e := range entries {
		if !valid[e.Name()] {
			errs = append(errs, fakeRelease(conf, e.Name()))
		}
	}
	return errors.Join(errs...)
}

func fakeStatus(conf *fakeConf, a *skel.CmdArgs) error {
	if msg, err := os.ReadFile(filepath.Join(conf.StateDir, "fail-status")); err == nil {
		return types.NewError(types.ErrPluginNotAvailable, strings.TrimSpace(string(msg)), "")
	}
	return nil
}
