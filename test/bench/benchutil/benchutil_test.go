package benchutil

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/ovsdbtest"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

func TestPercentiles(t *testing.T) {
	var hundred []int
	for i := 100; i >= 1; i-- { // unsorted on purpose
		hundred = append(hundred, i)
	}
	for _, tc := range []struct {
		values []int
		ps     []int
		want   []int
	}{
		{hundred, []int{0, 1, 50, 99, 100}, []int{1, 1, 50, 99, 100}},
		{[]int{3, 1, 2}, []int{0, 50, 100}, []int{1, 2, 3}},
		{[]int{1, 2, 3, 4}, []int{50, 75, 99}, []int{2, 3, 4}},
		{[]int{7}, []int{0, 50, 100}, []int{7, 7, 7}},
		{nil, []int{50}, []int{0}},
	} {
		in := slices.Clone(tc.values)
		if got := Percentiles(tc.values, tc.ps...); !slices.Equal(got, tc.want) {
			t.Errorf("Percentiles(%v, %v) = %v, want %v", tc.values, tc.ps, got, tc.want)
		}
		if !slices.Equal(in, tc.values) {
			t.Errorf("Percentiles sorted its argument: %v", tc.values)
		}
	}
	d := Percentiles([]time.Duration{3 * time.Millisecond, time.Millisecond}, 50)
	if d[0] != time.Millisecond {
		t.Errorf("p50 of durations: %v", d)
	}
}

func TestParallel(t *testing.T) {
	var seen [1000]atomic.Int32
	if err := Parallel(len(seen), 7, func(i int) error { seen[i].Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Fatalf("fn(%d) called %d times", i, n)
		}
	}
	boom := errors.New("boom")
	var calls atomic.Int32
	err := Parallel(1000, 4, func(i int) error {
		calls.Add(1)
		if i%10 == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("Parallel: %v, want boom", err)
	}
	if n := calls.Load(); n >= 1000 {
		t.Errorf("workers kept going after their errors: %d calls", n)
	}
}

func TestMem(t *testing.T) {
	if got := (Mem{RSS: 107 << 20, Peak: 109<<20 + 800<<10}).String(); got != "RSS 107.0 MiB (peak 109.8 MiB)" {
		t.Errorf("Mem.String() = %q", got)
	}
	if m := ProcMem(t, os.Getpid()); m.RSS <= 0 || m.Peak < m.RSS {
		t.Errorf("ProcMem(self) = %+v", m)
	}
	if _, err := procMem(-1); err == nil {
		t.Error("the memory of no process: no error")
	}
	start := CPUTime(os.Getpid())
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); {
	}
	if used := CPUTime(os.Getpid()) - start; used <= 0 {
		t.Errorf("CPUTime(self) grew by %v over 100 ms of spinning", used)
	}
}

func TestNBWatcher(t *testing.T) {
	nb := ovsdbtest.Start(t, ovsdbtest.NB)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := NewNBWatcher(ctx, nb.Remote, &nbdb.LogicalSwitch{}, &nbdb.AddressSet{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	hit := w.Expect(func(table string, m model.Model) bool {
		ls, ok := m.(*nbdb.LogicalSwitch)
		return ok && ls.Name == "sw1"
	})
	before := time.Now()
	nb.Exec(t, "ovn-nbctl", "ls-add", "sw0", "--", "ls-add", "sw1")
	at, err := Await(ctx, "sw1", hit, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if at.Before(before) {
		t.Errorf("sw1 seen at %v, before it was made (%v)", at, before)
	}
	if n := w.Changes(); n != 2 {
		t.Errorf("%d changes counted, want 2", n)
	}
	if w.LastChange(nbdb.LogicalSwitchTable).IsZero() || !w.LastChange(nbdb.AddressSetTable).IsZero() {
		t.Errorf("last changes: switches %v, address sets %v", w.LastChange(nbdb.LogicalSwitchTable), w.LastChange(nbdb.AddressSetTable))
	}
	var switches []nbdb.LogicalSwitch
	if n := w.Count(ctx, &switches); n != 2 {
		t.Errorf("Count: %d switches, want 2", n)
	}
	// A probe fires once.
	if _, err := Await(ctx, "sw1 again", hit, 100*time.Millisecond); err == nil {
		t.Error("the probe fired twice")
	}
}
