// Package poll is how tests (and the test harness) wait for something another process or
// goroutine makes true: ask again every interval until the answer is yes, and when time runs
// out, say what was awaited and what the condition said last. It is the one wait helper;
// fix a flaky wait here, not in a copy.
//
// A condition answers (done, why): done ends the wait; otherwise why, if not nil, says what
// is still missing and becomes part of the timeout's error. An error does not end the wait:
// most errors a condition meets while something starts up (connection refused, not found)
// are exactly what the wait is for.
package poll

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Until calls cond at once and then every interval until it reports done, and returns nil;
// or until ctx ends, and returns an error naming what and cond's last word.
func Until(ctx context.Context, what string, interval time.Duration, cond func() (bool, error)) error {
	var last error
	for {
		done, why := cond()
		if done {
			return nil
		}
		last = why
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// Eventually is Until for a test: it waits at most timeout (0: as long as ctx lasts) and
// fails tb at once if cond never reported done. cond runs on the calling goroutine, so it may
// itself stop the test (tb.Fatal) when waiting is pointless, say because a daemon exited.
func Eventually(tb testing.TB, ctx context.Context, what string, timeout, interval time.Duration, cond func() (bool, error)) {
	tb.Helper()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := Until(ctx, what, interval, cond); err != nil {
		tb.Fatal(err)
	}
}
