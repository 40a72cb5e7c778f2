// Package winsvc runs the node agent under the Windows service control manager when it was
// started as a service, and as a plain process otherwise: on Linux, from a terminal, or in
// a Windows HostProcess container (where Go turns the container's stop, a CTRL_SHUTDOWN
// event, into SIGTERM, which the caller's context already handles).
package winsvc

import "context"

// Runner is the agent's life: it returns when ctx ends or it fails.
type Runner func(ctx context.Context) error
