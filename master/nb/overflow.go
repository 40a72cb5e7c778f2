package nb

import (
	"github.com/go-logr/logr"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
)

// droppedEventMessage is what libovsdb (v0.7, cache.eventProcessor.AddEvent) logs when its
// event buffer of 65,536 events is full: the event is lost, with nothing else said.
// TestUnitEventOverflowResyncs overflows the buffer for real, so a libovsdb that words
// it otherwise fails there rather than silently here.
const droppedEventMessage = "dropping event because event buffer is full"

// WatchOverflow makes cfg's client report its dropped cache events: it wraps cfg.Logger
// (before Connect) and returns a channel that receives a value, coalesced, after each drop.
//
// libovsdb hands cache events to the handlers through a bounded buffer and drops an event
// when the buffer is full: a burst of changes bigger than the handlers keep up with (a
// refill after reconnecting to a large NB, another writer's big transaction). A lost event
// can be a refill's NB_Global insertion, which is how the controller notices a
// reconnection, or the deletion of a row it owns, which it would put back. The cache itself
// is right; only the news of the change is lost. So the one safe answer is a full resync,
// and libovsdb's log line is the only place the drop is told.
func WatchOverflow(cfg *ovsdb.Config) <-chan struct{} {
	ch := make(chan struct{}, 1)
	cfg.Logger = logr.New(&overflowSink{inner: cfg.Logger.GetSink(), ch: ch})
	return ch
}

// overflowSink passes everything to inner (nil: nothing) and signals ch on the message of a
// dropped event, whatever inner's verbosity.
type overflowSink struct {
	inner logr.LogSink
	ch    chan struct{}
}

func (s *overflowSink) Init(info logr.RuntimeInfo) {
	if s.inner != nil {
		s.inner.Init(info)
	}
}

// Enabled: level 0 always, where the drop is logged; the rest as inner says, so that
// libovsdb does not format its per-update debug messages for nothing.
func (s *overflowSink) Enabled(level int) bool {
	return level == 0 || (s.inner != nil && s.inner.Enabled(level))
}

func (s *overflowSink) Info(level int, msg string, kv ...any) {
	if msg == droppedEventMessage {
		select {
		case s.ch <- struct{}{}:
		default: // a resync is already due
		}
	}
	if s.inner != nil && s.inner.Enabled(level) {
		s.inner.Info(level, msg, kv...)
	}
}

func (s *overflowSink) Error(err error, msg string, kv ...any) {
	if s.inner != nil {
		s.inner.Error(err, msg, kv...)
	}
}

func (s *overflowSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	if s.inner != nil {
		c.inner = s.inner.WithValues(kv...)
	}
	return &c
}

func (s *overflowSink) WithName(name string) logr.LogSink {
	c := *s
	if s.inner != nil {
		c.inner = s.inner.WithName(name)
	}
	return &c
}
