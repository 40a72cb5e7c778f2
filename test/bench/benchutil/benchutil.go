// Package benchutil is what the benchmarks under test/bench (and the pod start-up benchmark
// in test/e2e) share: a process's memory and CPU, percentiles, a worker pool for creating
// objects, a client of the NB that times changes, and the master binary.
//
// Figures are printed, never asserted; so every benchmark prints a figure the same way:
// memory in MiB with one decimal, percentiles by nearest rank.
package benchutil

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Mem is a process's resident memory, now and at its peak, in bytes.
type Mem struct {
	RSS, Peak int64
}

// String is "RSS 107.0 MiB (peak 109.8 MiB)".
func (m Mem) String() string { return fmt.Sprintf("RSS %s (peak %s)", MiB(m.RSS), MiB(m.Peak)) }

// MiB formats a byte count as MiB with one decimal: "107.0 MiB".
func MiB(bytes int64) string { return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)) }

// ProcMem reads VmRSS and VmHWM of process pid; it fails tb if it cannot (the process is
// gone: the measured daemon died).
func ProcMem(tb testing.TB, pid int) Mem {
	tb.Helper()
	m, err := procMem(pid)
	if err != nil {
		tb.Fatalf("memory of process %d: %v", pid, err)
	}
	return m
}

func procMem(pid int) (Mem, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Mem{}, err
	}
	var m Mem
	var rss, hwm bool
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			m.RSS, rss = kb<<10, true
		case "VmHWM:":
			m.Peak, hwm = kb<<10, true
		}
	}
	if !rss || !hwm {
		return Mem{}, fmt.Errorf("/proc/%d/status: no VmRSS and VmHWM", pid)
	}
	return m, nil
}

// CPUTime is the user and system CPU time process pid has used; 0 if it cannot be read (the
// process is gone).
func CPUTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may contain spaces: fields count from after it.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// WaitIdle waits until process pid has used under 5% of a CPU in each of n consecutive
// periods of length step, or until done is closed; it returns how long it waited.
func WaitIdle(done <-chan struct{}, pid int, step time.Duration, n int) time.Duration {
	start := time.Now()
	for quiet := 0; quiet < n; {
		before := CPUTime(pid)
		select {
		case <-done:
			return time.Since(start)
		case <-time.After(step):
		}
		if CPUTime(pid)-before < step/20 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return time.Since(start)
}

// Percentiles returns the nearest-rank percentiles ps (0 to 100) of values: for p, the
// smallest value that at least p percent of the values do not exceed; 0 is the minimum, 100
// the maximum. values is not modified; with no values every percentile is the zero value.
func Percentiles[T cmp.Ordered](values []T, ps ...int) []T {
	out := make([]T, len(ps))
	if len(values) == 0 {
		return out
	}
	s := slices.Clone(values)
	slices.Sort(s)
	for i, p := range ps {
		rank := (len(s)*p + 99) / 100 // ceil(len*p/100), 1-based
		out[i] = s[min(max(rank-1, 0), len(s)-1)]
	}
	return out
}

// Parallel calls fn(i) for every i in [0, n) on workers goroutines. A worker stops at its
// first error; Parallel returns when all have stopped, with every error they met.
func Parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
