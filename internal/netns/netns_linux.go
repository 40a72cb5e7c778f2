// Package netns runs code inside another network namespace, the one way both the node agent
// (a pod's interface) and the test harness (a node or pod namespace) do it.
package netns

import (
	"fmt"
	"runtime"

	vnetns "github.com/vishvananda/netns"
)

// Do runs fn with the calling thread switched into the network namespace at path (a
// CNI_NETNS path such as /var/run/netns/x or /proc/PID/ns/net). The namespace is a property
// of the OS thread, so fn runs on a goroutine locked to its thread. If switching back fails,
// that thread stays locked and the goroutine ends, so the Go runtime retires the thread
// instead of handing a thread in the other namespace to other code. Sockets fn opens stay in
// that namespace after it returns (a listener made there serves inside it). fn must not stop
// a test (t.Fatal): it does not run on the test's goroutine.
func Do(path string, fn func() error) error {
	target, err := vnetns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", path, err)
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := vnetns.Set(target); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering network namespace %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := vnetns.Set(orig); err != nil {
			done <- fmt.Errorf("leaving network namespace %s: %w", path, err)
			return // still locked: the thread dies with this goroutine
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}
