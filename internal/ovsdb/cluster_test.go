package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

// cluster is a 3-member RAFT cluster of the Northbound database on loopback.
type cluster struct {
	t       *testing.T
	tl      tools
	dir     string
	members []*server
}

func newCluster(t *testing.T, tl tools, dir string) *cluster {
	t.Helper()
	ports := freePorts(t, 3)
	cl := &cluster{t: t, tl: tl, dir: dir}
	for i := range ports {
		cl.members = append(cl.members, newServer(t, tl, dir, fmt.Sprintf("s%d", i+1)))
	}
	raft := func(i int) string { return fmt.Sprintf("tcp:127.0.0.1:%d", ports[i]) }
	run(t, dir, tl.tool, "create-cluster", cl.members[0].db, nbSchema, raft(0))
	for i := 1; i < len(cl.members); i++ {
		run(t, dir, tl.tool, "join-cluster", cl.members[i].db, "OVN_Northbound", raft(i), raft(0))
	}
	for _, m := range cl.members {
		m.start()
	}
	return cl
}

// freePorts finds n TCP ports free on loopback. RAFT addresses cannot use port 0: every
// member must know the others' ports before it starts.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// remotes is the --db value naming the given members' unix sockets.
func (cl *cluster) remotes(members ...*server) string {
	var r []string
	for _, m := range members {
		r = append(r, m.unixRemote())
	}
	return strings.Join(r, ",")
}

// waitLeader waits until exactly one of members says it is the leader, that one is not
// notThis, and all of members have joined the cluster; it returns the leader.
func (cl *cluster) waitLeader(notThis *server, members ...*server) *server {
	cl.t.Helper()
	var leader *server
	poll.Eventually(cl.t, context.Background(), "a single new leader", 30*time.Second, 50*time.Millisecond, func() (bool, error) {
		var leaders []*server
		var status []string
		for _, m := range members {
			out, err := runErr(cl.dir, cl.tl.appctl, "-t", m.ctl, "cluster/status", "OVN_Northbound")
			if err != nil {
				return false, err
			}
			if !strings.Contains(out, "Status: cluster member") {
				return false, fmt.Errorf("%s has not joined yet:\n%s", m.name, out)
			}
			if strings.Contains(out, "Role: leader") {
				leaders = append(leaders, m)
			}
			status = append(status, m.name+": "+firstLine(out, "Role:"))
		}
		if len(leaders) != 1 || leaders[0] == notThis {
			return false, errors.New("no new single leader: " + strings.Join(status, ", "))
		}
		leader = leaders[0]
		return true, nil
	})
	return leader
}

func firstLine(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestFollowsLeader connects to a 3-member cluster with all remotes, moves the leadership
// away (the old leader keeps running), then kills the new leader, and checks each time that
// the client moves to the new leader, can write, and that its cache is the cluster's content.
func TestFollowsLeader(t *testing.T) {
	testenv.Integration(t)
	tl := needTools(t)
	dir := shortTempDir(t)
	cl := newCluster(t, tl, dir)
	leader := cl.waitLeader(nil, cl.members...)

	c := newClient(t, cl.remotes(cl.members...), Config{Tables: allTables()})
	if got := c.CurrentEndpoint(); got != leader.unixRemote() {
		t.Fatalf("connected to %s, want the leader %s", got, leader.unixRemote())
	}
	insertSwitches(t, c, &testLS{Name: "before-1"}, &testLS{Name: "before-2"})
	want := []string{"before-1", "before-2"}

	checkConverged := func(t *testing.T, members ...*server) {
		t.Helper()
		sort.Strings(want)
		poll.Eventually(t, context.Background(), "the cache to match the cluster", 20*time.Second, 50*time.Millisecond, func() (bool, error) {
			cached := cachedSwitches(t, c)
			onServer := serverSwitches(t, tl, dir, cl.remotes(members...))
			if !reflect.DeepEqual(cached, onServer) {
				return false, fmt.Errorf("cache %v, cluster %v", cached, onServer)
			}
			return reflect.DeepEqual(names(cached), want), fmt.Errorf("switches %q, want %q", names(cached), want)
		})
	}

	t.Run("leadership transferred", func(t *testing.T) {
		// OVS's test hook makes the leader hand leadership over to another member at its
		// next append request (a heartbeat will do) and stay in the cluster as a follower.
		run(t, dir, tl.appctl, "-t", leader.ctl, "cluster/failure-test", "transfer-leadership")
		newLeader := cl.waitLeader(leader, cl.members...)
		run(t, dir, tl.nbctl, "--db="+cl.remotes(cl.members...), "ls-add", "by-nbctl-1")
		want = append(want, "by-nbctl-1")
		poll.Eventually(t, context.Background(), "the client on the new leader", 20*time.Second, 50*time.Millisecond, func() (bool, error) {
			got := c.CurrentEndpoint()
			return got == newLeader.unixRemote(), fmt.Errorf("client on %q, leader is %s", got, newLeader.unixRemote())
		})
		leader = newLeader
		insertSwitches(t, c, &testLS{Name: "after-transfer"})
		want = append(want, "after-transfer")
		checkConverged(t, cl.members...)
	})
	if t.Failed() {
		return
	}

	t.Run("leader killed", func(t *testing.T) {
		leader.kill()
		var survivors []*server
		for _, m := range cl.members {
			if m != leader {
				survivors = append(survivors, m)
			}
		}
		newLeader := cl.waitLeader(leader, survivors...)
		// The client finds the new leader by itself. A transaction sent meanwhile may fail
		// (libovsdb can hand it the connection to a follower it is about to drop: "broken
		// pipe"); the controllers retry such a key, so the test waits for the client first.
		poll.Eventually(t, context.Background(), "the client on the new leader", 20*time.Second, 50*time.Millisecond, func() (bool, error) {
			got := c.CurrentEndpoint()
			return got == newLeader.unixRemote(), fmt.Errorf("client on %q, leader is %s", got, newLeader.unixRemote())
		})
		insertSwitches(t, c, &testLS{Name: "after-kill"})
		run(t, dir, tl.nbctl, "--db="+cl.remotes(survivors...), "ls-add", "by-nbctl-2")
		want = append(want, "after-kill", "by-nbctl-2")
		checkConverged(t, survivors...)
	})
}
