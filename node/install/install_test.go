package install

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/ovn-transparent/ovn-transparent/internal/cni"
)

func TestPluginInstallsBinaryAndConfList(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("#!/bin/true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin, conf := filepath.Join(dir, "bin"), filepath.Join(dir, "net.d")
	for range 2 { // the second run finds everything in place
		if err := Plugin(src, bin, conf, "/run/x/cni.sock"); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(filepath.Join(bin, cni.PluginType+exeSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o755 {
		t.Errorf("binary mode %v, want 0755", fi.Mode().Perm())
	}
	list, err := libcni.ConfListFromFile(filepath.Join(conf, cni.ConfListName))
	if err != nil {
		t.Fatal(err)
	}
	// This libcni reads cniVersions and picks the newest version it knows; containerd 1.6
	// and 1.7 read only cniVersion (node/integration runs their libcni on the same file).
	if list.CNIVersion != "1.1.0" || list.Name != cni.NetworkName || len(list.Plugins) != 1 || list.Plugins[0].Network.Type != cni.PluginType {
		t.Errorf("conflist: %+v", list)
	}
	nc, err := cni.ParseNetConf(list.Plugins[0].Bytes)
	if err != nil || nc.Socket != "/run/x/cni.sock" {
		t.Errorf("plugin socket %q (%v)", nc.Socket, err)
	}
	var raw struct {
		CNIVersion  string   `json:"cniVersion"`
		CNIVersions []string `json:"cniVersions"`
	}
	if err := json.Unmarshal(list.Bytes, &raw); err != nil || raw.CNIVersion != "1.0.0" || !slices.Equal(raw.CNIVersions, []string{"1.0.0", "1.1.0"}) {
		t.Errorf("conflist versions: cniVersion %q cniVersions %v (%v), want 1.0.0 and [1.0.0 1.1.0]", raw.CNIVersion, raw.CNIVersions, err)
	}
	if entries, _ := os.ReadDir(conf); len(entries) != 1 {
		t.Errorf("conf dir holds %d files, want 1 (no temporary left)", len(entries))
	}
}
