package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
)

// TestInactivityProbeDropsHungServer: a server that stops answering (SIGSTOP: its socket
// stays open, as behind a half-open TCP connection) is dropped by the inactivity probe, and
// the client is back with the server once it answers again (audit M4).
func TestInactivityProbeDropsHungServer(t *testing.T) {
	tl := needTools(t)
	dir := shortTempDir(t)
	s := newStandalone(t, tl, dir, "nb")
	s.start()
	c := newClient(t, s.unixRemote(), Config{Tables: allTables(), InactivityProbe: 200 * time.Millisecond, ReconnectTimeout: time.Second})
	insertSwitches(t, c, &testLS{Name: "before"})

	s.signal(syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			s.signal(syscall.SIGCONT)
		}
	}()
	// A hung server answers no echo: the client must notice, although nothing was closed.
	poll.Eventually(t, context.Background(), "the client to drop the hung server", 20*time.Second, 50*time.Millisecond, func() (bool, error) {
		return c.CurrentEndpoint() == "", errors.New("client still on the hung server")
	})
	s.signal(syscall.SIGCONT)
	stopped = false
	insertSwitches(t, c, &testLS{Name: "after"})
	poll.Eventually(t, context.Background(), "both switches in the cache", 20*time.Second, 50*time.Millisecond, func() (bool, error) {
		got := names(cachedSwitches(t, c))
		return reflect.DeepEqual(got, []string{"after", "before"}), fmt.Errorf("switches %q", got)
	})
}
