package poll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUntilReturnsOnceDone(t *testing.T) {
	calls := 0
	err := Until(context.Background(), "the third call", time.Millisecond, func() (bool, error) {
		calls++
		return calls == 3, errors.New("not yet")
	})
	if err != nil || calls != 3 {
		t.Fatalf("Until: %v after %d calls, want nil after 3", err, calls)
	}
}

func TestUntilTimeoutSaysWhatAndLastWord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	n := 0
	err := Until(ctx, "the moon", 5*time.Millisecond, func() (bool, error) {
		n++
		if n == 1 {
			return false, errors.New("first word")
		}
		return false, errors.New("last word")
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Until: %v, want a deadline error", err)
	}
	for _, want := range []string{"waiting for the moon", "last word"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "first word") {
		t.Errorf("error %q carries an earlier word, not the last", err)
	}
}

// TestUntilChecksBeforeGivingUp: a condition that holds already is done even when ctx has
// ended (a check after a long step must not fail for the step's time).
func TestUntilChecksBeforeGivingUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Until(ctx, "x", time.Hour, func() (bool, error) { return true, nil }); err != nil {
		t.Fatal(err)
	}
}

// recorder is a testing.TB that records a Fatal instead of stopping the goroutine.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.fatal = fmt.Sprint(args...) }

func TestEventuallyBoundsTheWait(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	Eventually(r, context.Background(), "never", 30*time.Millisecond, time.Millisecond, func() (bool, error) {
		return false, errors.New("still no")
	})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Eventually waited %v for a 30 ms timeout", took)
	}
	if !strings.Contains(r.fatal, "waiting for never") || !strings.Contains(r.fatal, "still no") {
		t.Errorf("Fatal %q, want what was awaited and the last word", r.fatal)
	}
	r = &recorder{TB: t}
	Eventually(r, context.Background(), "at once", time.Second, time.Millisecond, func() (bool, error) { return true, nil })
	if r.fatal != "" {
		t.Errorf("Fatal %q for a condition that held", r.fatal)
	}
}
