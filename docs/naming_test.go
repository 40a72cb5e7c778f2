package docs

import (
	"context"
	"net/netip"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-transparent/ovn-transparent/internal/svcmodel"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/master/netpol"
	"github.com/ovn-transparent/ovn-transparent/master/services"
	"github.com/ovn-transparent/ovn-transparent/master/topology"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// The NB naming table of architecture.md is what an operator reads to find the Kubernetes
// object behind a row in `ovn-nbctl show`; the master's builders are what writes the rows.
// This test builds the rows for sample objects with the master's own functions and holds the
// table to them, row by row, in both directions.

// namingRow is one row of the table: | object | name | table | owner | role | what |.
type namingRow struct {
	line                       int
	object, name, table, owner string
	kind                       nb.Kind
	key                        string // the owner key pattern
	role                       nb.Role
}

const namingHeader = "| object | name | table | owner | role |"

// readNamingTable returns the rows of the table under "## The logical topology in NB".
func readNamingTable(t *testing.T) []namingRow {
	t.Helper()
	b, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	start := slices.Index(lines, "## The logical topology in NB")
	if start < 0 {
		t.Fatal("architecture.md: no section \"## The logical topology in NB\"")
	}
	i := start
	for i < len(lines) && !strings.HasPrefix(lines[i], namingHeader) {
		i++
	}
	if i == len(lines) {
		t.Fatalf("architecture.md: no table with the header %q after line %d", namingHeader, start+1)
	}
	var rows []namingRow
	for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cells := strings.Split(strings.Trim(lines[i], "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if len(cells) < 5 {
			t.Errorf("architecture.md:%d: want at least 5 cells, got %d", i+1, len(cells))
			continue
		}
		r := namingRow{line: i + 1, object: cells[0], name: unquote(cells[1]), table: unquote(cells[2]),
			owner: cells[3], role: nb.Role(unquote(cells[4]))}
		kind, key, ok := strings.Cut(r.owner, " ")
		if !ok {
			t.Errorf("architecture.md:%d: owner %q: want \"Kind `key`\"", r.line, r.owner)
			continue
		}
		r.kind, r.key = nb.Kind(kind), unquote(key)
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatal("architecture.md: the naming table has no rows")
	}
	return rows
}

func unquote(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }

// The placeholders the table may use: sample values the test builds its objects with, or a
// class of values for what the code derives (hashes, rule names).
var (
	placeholderSamples = map[string]string{
		"node": "node1", "namespace": "ns", "pod": "pod", "name": "web", "PROTO": "TCP",
	}
	placeholderClasses = map[string]string{
		"hash": "[0-9a-f]{16}",
		"rule": "[a-z0-9-]+",
	}
	placeholderRE = regexp.MustCompile(`<([A-Za-z]+)>`)
)

// pattern turns a name pattern of the table ("rtos-<node>") into a regexp matching the name
// the code gives the sample objects ("rtos-node1").
func pattern(s string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	rest := s
	for {
		loc := placeholderRE.FindStringSubmatchIndex(rest)
		if loc == nil {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:loc[0]]))
		ph := rest[loc[2]:loc[3]]
		switch {
		case placeholderSamples[ph] != "":
			b.WriteString(regexp.QuoteMeta(placeholderSamples[ph]))
		case placeholderClasses[ph] != "":
			b.WriteString(placeholderClasses[ph])
		default:
			return nil, &unknownPlaceholder{ph}
		}
		rest = rest[loc[1]:]
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

type unknownPlaceholder struct{ name string }

func (e *unknownPlaceholder) Error() string {
	return "placeholder <" + e.name + "> is unknown to docs/naming_test.go (placeholderSamples, placeholderClasses)"
}

// builtRows are the rows the master writes for one node "node1" with a gateway, a pod ns/pod
// on it, a Service ns/web (once with externalTrafficPolicy Local, once with
// internalTrafficPolicy Local, so that every kind of load balancer exists) and a
// NetworkPolicy ns/web with one peer.
func builtRows(t *testing.T) []nb.Row {
	t.Helper()
	cfg := topology.Config{
		ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
		JoinSubnet:  netip.MustParsePrefix("100.64.0.0/16"),
	}
	rows := topology.Cluster(cfg)
	rows = append(rows, topology.ClusterLBGroup(nil))
	rows = append(rows, netpol.MeterRows()...)
	cp, err := netpol.ClusterRows(netpol.ControlPlane{Addresses: []netip.Prefix{netip.MustParsePrefix("192.0.2.20/32")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows = append(rows, cp...)

	node, err := topology.NodeRows(cfg, topology.Node{
		Name:   "node1",
		Subnet: netip.MustParsePrefix("10.244.1.0/24"),
		Gateway: &topology.Gateway{
			ChassisID: "chassis-1",
			NodeIP:    netip.MustParsePrefix("172.18.0.1/24"),
			MAC:       "0a:58:ac:12:00:01",
			NextHop:   netip.MustParseAddr("172.18.0.254"),
			JoinIP:    netip.MustParseAddr("100.64.0.2"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rows = append(rows, node...)

	pod, err := topology.PodRows(topology.Pod{
		Namespace: "ns", Name: "pod", UID: "uid-1", Node: "node1",
		IP: netip.MustParseAddr("10.244.1.5"),
	})
	if err != nil {
		t.Fatal(err)
	}
	rows = append(rows, pod...)

	nodes := []services.Node{{Name: "node1", IP: netip.MustParseAddr("172.18.0.1"), HasSwitch: true}}
	for _, policy := range []struct{ etp, itp string }{{"Local", "Cluster"}, {"Cluster", "Local"}} {
		itp := corev1.ServiceInternalTrafficPolicy(policy.itp)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
			Spec: corev1.ServiceSpec{
				Type:                  corev1.ServiceTypeNodePort,
				ClusterIP:             "10.96.0.10",
				ClusterIPs:            []string{"10.96.0.10"},
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicy(policy.etp),
				InternalTrafficPolicy: &itp,
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80,
					TargetPort: intstr.FromInt32(8080), NodePort: 30080}},
			},
		}
		lbs, problems := services.Rows(svc, nil, nodes, svcmodel.ExternalIPPolicy{})
		if len(problems) > 0 {
			t.Fatalf("services.Rows: %v", problems)
		}
		rows = append(rows, lbs...)
	}

	out, err := netpol.Translate(context.Background(), netpol.Input{
		Policy: &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
			Spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}},
				}},
			},
		},
		Management: "ip4.src == 10.244.0.2/255.255.0.255",
	})
	if err != nil {
		t.Fatal(err)
	}
	rows = append(rows, out.Rows...)
	if len(out.Peers) == 0 {
		t.Fatal("netpol.Translate: the sample policy has no peer")
	}
	for _, p := range out.Peers {
		rows = append(rows, netpol.PeerRow(p, nil))
	}
	return rows
}

// tableOf is the NB table of a model, from the generated models' own constants.
func tableOf(m any) string {
	switch m.(type) {
	case *nbdb.LogicalSwitch:
		return nbdb.LogicalSwitchTable
	case *nbdb.LogicalSwitchPort:
		return nbdb.LogicalSwitchPortTable
	case *nbdb.LogicalRouter:
		return nbdb.LogicalRouterTable
	case *nbdb.LogicalRouterPort:
		return nbdb.LogicalRouterPortTable
	case *nbdb.LogicalRouterStaticRoute:
		return nbdb.LogicalRouterStaticRouteTable
	case *nbdb.LogicalRouterPolicy:
		return nbdb.LogicalRouterPolicyTable
	case *nbdb.NAT:
		return nbdb.NATTable
	case *nbdb.LoadBalancer:
		return nbdb.LoadBalancerTable
	case *nbdb.LoadBalancerGroup:
		return nbdb.LoadBalancerGroupTable
	case *nbdb.ChassisTemplateVar:
		return nbdb.ChassisTemplateVarTable
	case *nbdb.PortGroup:
		return nbdb.PortGroupTable
	case *nbdb.ACL:
		return nbdb.ACLTable
	case *nbdb.AddressSet:
		return nbdb.AddressSetTable
	case *nbdb.Meter:
		return nbdb.MeterTable
	case *nbdb.MeterBand:
		return nbdb.MeterBandTable
	}
	return reflect.TypeOf(m).String()
}

// nameOf is the row's name column, and whether its table has one.
func nameOf(m any) (string, bool) {
	v := reflect.ValueOf(m)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	f := v.FieldByName("Name")
	if !f.IsValid() {
		return "", false
	}
	switch f.Kind() {
	case reflect.String:
		return f.String(), true
	case reflect.Pointer:
		if f.IsNil() {
			return "", true
		}
		return f.Elem().String(), true
	}
	return "", false
}

// kinds are the owner kinds the master has; the registry gives their roles.
var kinds = []nb.Kind{nb.Cluster, nb.Node, nb.Pod, nb.Service, nb.NetworkPolicy, nb.NetworkPolicyPeer}

const noName = "—"

func TestNamingTableMatchesTheCode(t *testing.T) {
	doc := readNamingTable(t)
	byRole := map[nb.Role]namingRow{}
	for _, r := range doc {
		if prev, dup := byRole[r.role]; dup {
			t.Errorf("architecture.md:%d: role %s is also on line %d", r.line, r.role, prev.line)
		}
		byRole[r.role] = r
	}

	// Every role the registry knows is documented, and nothing else is.
	registered := map[nb.Role]nb.Kind{}
	for _, k := range kinds {
		for _, role := range nb.Roles(k) {
			registered[role] = k
			if _, ok := byRole[role]; !ok {
				t.Errorf("architecture.md: the naming table has no row for role %s (kind %s) of the registry in master/nb", role, k)
			}
		}
	}
	for _, r := range doc {
		if k, ok := registered[r.role]; !ok {
			t.Errorf("architecture.md:%d: role %q is not in the registry of master/nb", r.line, r.role)
		} else if k != r.kind {
			t.Errorf("architecture.md:%d: role %s belongs to kind %s, the table says %s", r.line, r.role, k, r.kind)
		}
	}

	built := builtRows(t)
	seen := map[nb.Role]bool{}
	for _, row := range built {
		id := row.ID
		seen[id.Role] = true
		d, ok := byRole[id.Role]
		if !ok {
			t.Errorf("the master writes %s (%s), which the naming table does not list", id, tableOf(row.Model))
			continue
		}
		if id.Kind != d.kind {
			t.Errorf("architecture.md:%d (%s): owner kind %s, the code writes %s", d.line, d.object, d.kind, id.Kind)
		}
		if got := tableOf(row.Model); got != d.table {
			t.Errorf("architecture.md:%d (%s): table %s, the code writes %s", d.line, d.object, d.table, got)
		}
		if re, err := pattern(d.key); err != nil {
			t.Errorf("architecture.md:%d (%s): owner key %q: %v", d.line, d.object, d.key, err)
		} else if !re.MatchString(id.Name) {
			t.Errorf("architecture.md:%d (%s): owner key %q, the code's is %q", d.line, d.object, d.key, id.Name)
		}
		name, hasName := nameOf(row.Model)
		if d.name == noName {
			if hasName && name != "" {
				t.Errorf("architecture.md:%d (%s): the table says no name, the code names it %q", d.line, d.object, name)
			}
			continue
		}
		re, err := pattern(d.name)
		if err != nil {
			t.Errorf("architecture.md:%d (%s): name %q: %v", d.line, d.object, d.name, err)
			continue
		}
		if !re.MatchString(name) {
			t.Errorf("architecture.md:%d (%s): name %q, the code names it %q", d.line, d.object, d.name, name)
		}
	}
	for _, r := range doc {
		if !seen[r.role] {
			t.Errorf("architecture.md:%d (%s): the test builds no row of role %s: give builtRows a sample object that has one", r.line, r.object, r.role)
		}
	}
}

// The test must catch a drift, not only agree with today's text.
func TestNamingPatternRejectsDrift(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		match         bool
	}{
		{"rtos-<node>", "rtos-node1", true},
		{"rtos-<node>", "rtos_node1", false},
		{"GR_<node>", "GR_node1", true},
		{"GR_<node>", "GR_node2", false},
		{"<namespace>_<pod>", "ns_pod", true},
		{"<namespace>_<pod>", "ns-pod", false},
		{"np_<hash>", "np_0123456789abcdef", true},
		{"np_<hash>", "np_ns_web", false},
		{"Service_<namespace>/<name>_<PROTO>_cluster", "Service_ns/web_TCP_cluster", true},
		{"Service_<namespace>/<name>_<PROTO>_cluster", "Service_ns/web_tcp_cluster", false},
	} {
		re, err := pattern(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := re.MatchString(c.name); got != c.match {
			t.Errorf("pattern %q on %q: match %v, want %v", c.pattern, c.name, got, c.match)
		}
	}
	if _, err := pattern("<chassis>"); err == nil {
		t.Error("an unknown placeholder must be an error")
	}
}
