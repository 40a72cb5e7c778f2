//go:build linux

package realnode

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
)

// TestHealthEndpoints: the master and every node agent answer /healthz and /readyz on their
// health address, and /metrics holds what an operator needs to see the work they did for the
// pods of the other tests: the master's event-to-NB latency and NB operations, IPAM usage;
// the agents' CNI requests by command and the pods attached. The master's address is in the
// host's namespace, each agent's on its node's loopback (the default, 127.0.0.1:9477).
func TestHealthEndpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// One pod per node, so each agent has answered an ADD.
	ns := namespace(ctx, t, "health")
	for _, n := range cl.Nodes {
		create(ctx, t, netexec(ns, "p-"+n.Name, n.Name, 8080, false))
	}
	for _, n := range cl.Nodes {
		waitReady(ctx, t, ns, "p-"+n.Name)
	}

	master := cl.MasterHealthURL()
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(master + path); code != 200 || body != "ok\n" {
			t.Errorf("master %s: %d %q", path, code, body)
		}
	}
	_, m := httpGet(master + "/metrics")
	for _, want := range []string{
		`ovnt_master_event_to_nb_seconds_count{kind="Pod"}`,
		`ovnt_master_nb_operations_total{op="insert",table="Logical_Switch_Port"}`,
		`ovnt_master_ipam_pod_addresses{node="` + cl.Nodes[0].Name + `",state="used"}`,
		`ovnt_master_queue_depth`,
		"\novnt_master_leader 1\n",
		`ovnt_master_nb_disconnects_total{primary_model="OVN_Northbound"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("master /metrics lacks %q", want)
		}
	}

	for _, n := range cl.Nodes {
		var code int
		var body, metrics string
		poll.Eventually(t, ctx, n.Name+" agent ready with its ADD counted", 30*time.Second, 200*time.Millisecond, func() (bool, error) {
			var err error
			if code, body, err = getInNetns(n.Netns, "127.0.0.1:9477", "/readyz"); err != nil {
				return false, err
			}
			if _, metrics, err = getInNetns(n.Netns, "127.0.0.1:9477", "/metrics"); err != nil {
				return false, err
			}
			// Each node's ADD waited for its port's flows; its OVSDB never went away.
			installed := strings.Contains(metrics, "\novnt_node_port_install_seconds_count ") &&
				!strings.Contains(metrics, "\novnt_node_port_install_seconds_count 0\n")
			return code == 200 && body == "ok\n" && strings.Contains(metrics, `ovnt_node_cni_requests_total{command="ADD",result="ok"}`) &&
					strings.Contains(metrics, "\novnt_node_pods_attached ") && installed &&
					strings.Contains(metrics, `ovnt_node_ovsdb_disconnects_total{primary_model="Open_vSwitch"} 0`),
				fmt.Errorf("/readyz %d %q; /metrics has ADD ok: %v, port installs counted: %v", code, body, strings.Contains(metrics, `command="ADD",result="ok"`), installed)
		})
	}
}

// httpGet returns the status and body of a GET of url (0 and the error when nothing answers).
func httpGet(url string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// getInNetns GETs path from addr inside network namespace netns. The connection is opened
// on the namespace's thread (net/http would dial from goroutines of its own, in whatever
// namespace their threads are in), and read as HTTP/1.0: the server closes it after the body.
func getInNetns(netns, addr, path string) (int, string, error) {
	var conn net.Conn
	if err := harness.InNetns(netns, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	}); err != nil {
		return 0, "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
