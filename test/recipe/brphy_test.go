package recipe

import (
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The recipe is the oracle and BrPhy is its text in Go: if one changes without the other, the
// tests that compare our bridges with BrPhy would be comparing with something nobody proved.

const (
	phys, patch = 3, 7
	mac         = "0a:58:ac:12:00:01"
)

var ip = netip.MustParseAddr("172.18.0.1")

func readRecipe(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("ovn-gateway.sh")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// recipeLines is brphy_flows of the recipe with the shell variables filled in, in the order
// the recipe writes them: the here-document, then the NodePort loop's two echo lines per entry
// of NODEPORTS.
func recipeLines(t *testing.T, script string) ([]string, []NodePort) {
	t.Helper()
	_, fn, ok := strings.Cut(script, "\nbrphy_flows() {")
	if !ok {
		t.Fatal("ovn-gateway.sh: no brphy_flows")
	}
	_, doc, ok := strings.Cut(fn, "cat <<EOT\n")
	if !ok {
		t.Fatal("brphy_flows: no here-document")
	}
	doc, loop, ok := strings.Cut(doc, "\nEOT\n")
	if !ok {
		t.Fatal("brphy_flows: here-document not closed")
	}
	loop, _, ok = strings.Cut(loop, "\n  done;")
	if !ok {
		t.Fatal("brphy_flows: no NodePort loop after the here-document")
	}
	vars := strings.NewReplacer("$phys", strconv.Itoa(phys), "$patch", strconv.Itoa(patch), "$mac", mac, "$ip", ip.String())
	lines := strings.Split(vars.Replace(doc), "\n")

	m := regexp.MustCompile(`\nNODEPORTS="([^"]*)"`).FindStringSubmatch(script)
	if m == nil {
		t.Fatal("ovn-gateway.sh: no NODEPORTS")
	}
	echo := regexp.MustCompile(`echo "([^"]*)"`).FindAllStringSubmatch(loop, -1)
	if len(echo) != 2 {
		t.Fatalf("brphy_flows: want the NodePort loop's 2 echo lines, found %d", len(echo))
	}
	var ports []NodePort
	for _, p := range strings.Fields(m[1]) {
		proto, port, _ := strings.Cut(p, ":")
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			t.Fatalf("NODEPORTS %q: %v", p, err)
		}
		ports = append(ports, NodePort{proto, uint16(n)})
		entry := strings.NewReplacer("${p%:*}", proto, "${p#*:}", port)
		for _, e := range echo {
			lines = append(lines, vars.Replace(entry.Replace(e[1])))
		}
	}
	return lines, ports
}

func TestBrPhyIsTheRecipe(t *testing.T) {
	want, ports := recipeLines(t, readRecipe(t))
	if !slices.Equal(ports, NodePorts) {
		t.Errorf("NodePorts = %v, the recipe's NODEPORTS = %v", NodePorts, ports)
	}
	got := BrPhy(phys, patch, mac, ip, ports)
	if !slices.Equal(got, want) {
		t.Errorf("BrPhy differs from the recipe's brphy_flows:\n got: %s\nwant: %s",
			strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	for _, l := range want {
		if strings.Contains(l, "$") {
			t.Errorf("recipe line with a variable this test does not fill in: %s", l)
		}
	}
}

// The recipe runs its helpers from its own directory ($S/...): every one it calls is here.
func TestRecipeHelpersPresent(t *testing.T) {
	for _, script := range []string{"ovn-gateway.sh", "ovn-gateway-teardown.sh"} {
		b, err := os.ReadFile(script)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\$S/([A-Za-z0-9_.-]+\.sh)`).FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(m[1]); err != nil {
				t.Errorf("%s calls %s: %v", script, m[1], err)
			}
		}
	}
}
