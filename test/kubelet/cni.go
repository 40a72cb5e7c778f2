//go:build linux

package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// Timeouts of one CNI call. ADD may wait for the network plugin's control plane (the master
// allocating the pod's address), so it gets as long as kubelet gives a sandbox creation.
const (
	cniAddTimeout    = 2 * time.Minute
	cniDelTimeout    = time.Minute
	cniStatusTimeout = 10 * time.Second
)

// errCNINotInitialized is containerd's answer while the configuration directory is empty.
var errCNINotInitialized = errors.New("cni plugin not initialized")

// cniRuntime is the container runtime's CNI side: configuration loading, the plugin calls,
// and the one GC at start-up.
type cniRuntime struct {
	confDir string
	cni     *libcni.CNIConfig
	valid   func() []types.GCAttachment
	logf    func(string, ...any)

	mu     sync.Mutex
	gcDone bool
	adds   []time.Duration // how long each successful ADD took, for benchmarks
}

// newCNIRuntime: plugins' stderr goes to stderr; valid lists the attachments GC must keep.
func newCNIRuntime(cfg Config, stderr io.Writer, valid func() []types.GCAttachment, logf func(string, ...any)) *cniRuntime {
	exec := &netnsExec{netns: cfg.Netns, raw: &invoke.RawExec{Stderr: stderr}}
	return &cniRuntime{
		confDir: cfg.CNIConfDir,
		cni:     libcni.NewCNIConfigWithCacheDir(cfg.CNIBinDirs, cfg.CNICacheDir, exec),
		valid:   valid,
		logf:    logf,
	}
}

// load reads the network configuration as containerd does: the first file of the directory
// in name order with extension .conf, .conflist or .json; a .conflist is a plugin list, the
// others are one plugin's configuration, wrapped into a list.
func (c *cniRuntime) load() (*libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(c.confDir, []string{".conf", ".conflist", ".json"})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errCNINotInitialized, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no network config found in %s", errCNINotInitialized, c.confDir)
	}
	sort.Strings(files)
	if filepath.Ext(files[0]) == ".conflist" {
		return libcni.NetworkConfFromFile(files[0])
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	single, err := libcni.NetworkPluginConfFromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", files[0], err)
	}
	return libcni.ConfListFromConf(single)
}

// config returns the current configuration. The first time there is one, it first runs GC
// with the attachments the kubelet knows are valid, so that whatever a previous kubelet of
// this node left behind (in the cache directory and in the plugin) is deleted before any new
// ADD. A GC failure is logged, not retried: GC is housekeeping.
func (c *cniRuntime) config(ctx context.Context) (*libcni.NetworkConfigList, error) {
	list, err := c.load()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.gcDone {
		c.gcDone = true
		valid := c.valid()
		ctx, cancel := context.WithTimeout(ctx, cniDelTimeout)
		defer cancel()
		if err := c.cni.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: valid}); err != nil {
			c.logf("CNI GC of network %s: %v", list.Name, err)
		} else {
			c.logf("CNI GC of network %s done (%d valid attachments)", list.Name, len(valid))
		}
	}
	return list, nil
}

// status runs the plugins' STATUS (a no-op for configurations older than CNI 1.1.0).
func (c *cniRuntime) status(ctx context.Context) error {
	list, err := c.config(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cniStatusTimeout)
	defer cancel()
	return c.cni.GetStatusNetworkList(ctx, list)
}

func (c *cniRuntime) add(ctx context.Context, rt *libcni.RuntimeConf) (types.Result, error) {
	list, err := c.config(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cniAddTimeout)
	defer cancel()
	start := time.Now()
	res, err := c.cni.AddNetworkList(ctx, list, rt)
	if err == nil {
		c.mu.Lock()
		c.adds = append(c.adds, time.Since(start))
		c.mu.Unlock()
	}
	return res, err
}

// addLatencies returns the durations of the successful ADDs so far (plugin exec included,
// as a container runtime sees it).
func (c *cniRuntime) addLatencies() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.adds...)
}

func (c *cniRuntime) del(ctx context.Context, rt *libcni.RuntimeConf) error {
	list, err := c.config(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cniDelTimeout)
	defer cancel()
	return c.cni.DelNetworkList(ctx, list, rt)
}

func (c *cniRuntime) check(ctx context.Context, rt *libcni.RuntimeConf) error {
	list, err := c.config(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cniStatusTimeout)
	defer cancel()
	return c.cni.CheckNetworkList(ctx, list, rt)
}

// podIPs picks the pod's addresses from an ADD result as containerd does: the IPs of the
// interface named ifName inside the sandbox (a result may also list host-side interfaces),
// or every IP when the result names no interfaces. IPv4 comes first: the first is status.podIP.
func podIPs(res types.Result, ifName string) ([]string, error) {
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("CNI result: %w", err)
	}
	var v4, v6 []string
	for _, ip := range r.IPs {
		if len(r.Interfaces) > 0 {
			if ip.Interface == nil || *ip.Interface < 0 || *ip.Interface >= len(r.Interfaces) {
				continue
			}
			iface := r.Interfaces[*ip.Interface]
			if iface.Name != ifName || iface.Sandbox == "" {
				continue
			}
		}
		if ip.Address.IP.To4() != nil {
			v4 = append(v4, ip.Address.IP.String())
		} else {
			v6 = append(v6, ip.Address.IP.String())
		}
	}
	ips := append(v4, v6...)
	if len(ips) == 0 {
		b, _ := json.Marshal(r)
		return nil, fmt.Errorf("CNI result has no IP on %s: %s", ifName, b)
	}
	return ips, nil
}

// netnsExec runs CNI plugins inside the node's network namespace, where a real node's
// container runtime runs them: a plugin that creates the host side of a pod's interface must
// create it on the node. The child inherits the namespace of the OS thread that forks it,
// which harness.InNetns holds there for the duration of the call.
type netnsExec struct {
	netns string
	raw   *invoke.RawExec
	version.PluginDecoder
}

func (e *netnsExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	if e.netns == "" {
		return e.raw.ExecPlugin(ctx, path, stdin, environ)
	}
	var out []byte
	var err error
	if nsErr := harness.InNetns(e.netns, func() error {
		out, err = e.raw.ExecPlugin(ctx, path, stdin, environ)
		return nil
	}); nsErr != nil {
		return nil, nsErr
	}
	return out, err
}

func (e *netnsExec) FindInPath(plugin string, paths []string) (string, error) {
	return invoke.FindInPath(plugin, paths)
}
