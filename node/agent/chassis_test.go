package agent

import "testing"

func TestMgmtIfName(t *testing.T) {
	for node, want := range map[string]string{
		"node1":                          "k8s-node1",
		"ip-10-0-0-1.eu-west-1.internal": "k8s-ip-10-0-0-1",
	} {
		if got := MgmtIfName(node); got != want {
			t.Errorf("MgmtIfName(%q) = %q, want %q", node, got, want)
		}
	}
}
