package agent

import (
	"testing"

	"github.com/ovn-transparent/ovn-transparent/internal/winacl"
)

// M7: on Windows the agent owns the ACLs of the CNI directories containerd runs and reads as
// SYSTEM (read-only to users) and of its kubeconfig (no user access at all).
func TestACLTargets(t *testing.T) {
	cfg := Config{CNIBinDir: `C:\opt\cni\bin`, CNIConfDir: `C:\etc\cni\net.d`, Kubeconfig: `C:\ovn-transparent\kubeconfig`}
	want := map[string]string{cfg.CNIBinDir: winacl.Program, cfg.CNIConfDir: winacl.Program, cfg.Kubeconfig: winacl.PrivateFile}
	got := aclTargets(cfg)
	if len(got) != len(want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	for _, tg := range got {
		if want[tg.Path] != tg.Descriptor {
			t.Errorf("%s gets %q, want %q", tg.Path, tg.Descriptor, want[tg.Path])
		}
	}
	cfg.Kubeconfig = "" // in-cluster: the token is the kubelet's to protect
	if n := len(aclTargets(cfg)); n != 2 {
		t.Errorf("%d targets without a kubeconfig", n)
	}
}
