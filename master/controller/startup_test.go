package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/ovn-transparent/ovn-transparent/internal/reconcile"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
)

// stubReconciler is a Service reconciler whose keys and desired states are given.
type stubReconciler struct {
	names   []string
	listErr error
	errs    map[string]error // by key; other keys want no rows
	mu      sync.Mutex
	then    []string // keys whose follow-up ran
}

func (*stubReconciler) kind() nb.Kind             { return nb.Service }
func (s *stubReconciler) keys() ([]string, error) { return s.names, s.listErr }

func (s *stubReconciler) desired(_ context.Context, key string) (desire, error) {
	if err := s.errs[key]; err != nil {
		return desire{}, err
	}
	return desire{afterCommit: func(*nb.Plan) ([]nb.Key, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.then = append(s.then, key)
		return nil, nil
	}}, nil
}

// logLines collects log lines, at every verbosity.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 10})
}

func (l *logLines) has(t *testing.T, parts ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		found := true
		for _, p := range parts {
			found = found && strings.Contains(line, p)
		}
		if found {
			return
		}
	}
	t.Errorf("no log line with %q in:\n%s", parts, strings.Join(l.lines, "\n"))
}

// TestStartupBatchLeavesFailuresToQueue: the start-up batcher never skips silently. A key
// whose desired state fails is logged (quietly when it waits for another key) and left to
// the work queue; the others converge and run their follow-ups; a kind whose keys cannot be
// listed is logged.
func TestStartupBatchLeavesFailuresToQueue(t *testing.T) {
	var logs logLines
	log := logs.logger()
	c := &Controller{
		caches: &caches{cfg: Config{Workers: 2}, view: rowsView{}, log: log},
		queue:  reconcile.New[nb.Key]("test", nil, log, reconcile.Options{}),
	}
	broken := errors.New("endpointslice cache unreadable")
	r := &stubReconciler{
		names: []string{"ns/a", "ns/b", "ns/c", "ns/d", "ns/e"},
		errs: map[string]error{
			"ns/b": broken,
			"ns/d": &nb.MissingParentError{Row: nb.NewID(nb.Service, "ns/d", nb.ServiceClusterLB), Parent: nb.NewID(nb.Cluster, nb.ClusterName, nb.ClusterLBGroup)},
		},
	}
	c.batchKind(context.Background(), r, 2)

	if got := c.queueLen(); got != 2 {
		t.Errorf("%d keys left to the queue, want ns/b and ns/d", got)
	}
	logs.has(t, "Start-up batch: left to the work queue", "ns/b", broken.Error())
	logs.has(t, "Start-up batch: waiting", "ns/d")
	logs.has(t, `"kind"="Service"`, `"keys"=5`, `"failed"=2`)
	if len(r.then) != 3 {
		t.Errorf("follow-ups ran for %v, want ns/a, ns/c, ns/e", r.then)
	}

	listErr := errors.New("service cache unreadable")
	c.batchKind(context.Background(), &stubReconciler{listErr: listErr}, 2)
	logs.has(t, "cannot list keys", listErr.Error())
}
