package ipam

import (
	"errors"
	"fmt"
)

// ErrExhausted is matched (errors.Is) by every *ExhaustedError.
var ErrExhausted = errors.New("ipam: exhausted")

// ExhaustedError says a pool has nothing left to give.
type ExhaustedError struct {
	Pool string // what was asked for, e.g. "node subnet in 10.244.0.0/23"
}

func (e *ExhaustedError) Error() string { return fmt.Sprintf("ipam: no free %s", e.Pool) }

// Is makes errors.Is(err, ErrExhausted) true.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// ErrConflict is matched (errors.Is) by every *ConflictError.
var ErrConflict = errors.New("ipam: conflict")

// ConflictError says a reservation asked for something another owner holds, or an owner
// asked for a second thing while it holds one.
type ConflictError struct {
	What   string // the subnet or address asked for
	Owner  string // who asked
	Holder string // who holds What, or "" when Owner already holds Held
	Held   string
}

func (e *ConflictError) Error() string {
	if e.Holder != "" {
		return fmt.Sprintf("ipam: %s is held by %s, not %s", e.What, e.Holder, e.Owner)
	}
	return fmt.Sprintf("ipam: %s cannot have %s, it holds %s", e.Owner, e.What, e.Held)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// ErrOutOfRange is matched (errors.Is) by every *OutOfRangeError.
var ErrOutOfRange = errors.New("ipam: out of range")

// OutOfRangeError says a reservation asked for something the pool never gives: outside its
// range, the wrong size, or reserved for the infrastructure.
type OutOfRangeError struct {
	What, Pool, Why string
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("ipam: %s is not in %s: %s", e.What, e.Pool, e.Why)
}

// Is makes errors.Is(err, ErrOutOfRange) true.
func (e *OutOfRangeError) Is(target error) bool { return target == ErrOutOfRange }

// pool hands out the indexes first..last (inclusive) to owners, one index per owner, the
// lowest free index first. It is not safe for concurrent use.
//
// Lowest-first keeps allocations dense and predictable; a freed address comes back with the
// same MAC (the MAC derives from the IP), so neighbours' caches stay right when it is reused.
type pool struct {
	first, last uint64
	holder      map[uint64]string
	byOwner     map[string]uint64
	// hint is a lower bound of the free indexes: nothing below it is free.
	hint uint64
}

func newPool(first, last uint64) *pool {
	return &pool{first: first, last: last, holder: map[uint64]string{}, byOwner: map[string]uint64{}, hint: first}
}

func (p *pool) get(owner string) (uint64, bool) {
	i, ok := p.byOwner[owner]
	return i, ok
}

// reserve gives index i to owner. It is idempotent; it fails if i is held by someone else
// or owner holds another index.
func (p *pool) reserve(owner string, i uint64) (conflictHolder string, heldIndex uint64, ok bool) {
	if h, taken := p.holder[i]; taken && h != owner {
		return h, 0, false
	}
	if j, has := p.byOwner[owner]; has && j != i {
		return "", j, false
	}
	p.holder[i] = owner
	p.byOwner[owner] = i
	return "", 0, true
}

// allocate returns owner's index, giving it the lowest free one if it has none.
func (p *pool) allocate(owner string) (uint64, bool) {
	if i, ok := p.byOwner[owner]; ok {
		return i, true
	}
	for i := p.hint; i <= p.last && i >= p.first; i++ {
		if _, taken := p.holder[i]; !taken {
			p.holder[i] = owner
			p.byOwner[owner] = i
			p.hint = i + 1
			return i, true
		}
	}
	p.hint = p.last + 1
	return 0, false
}

// release frees owner's index, if any.
func (p *pool) release(owner string) (uint64, bool) {
	i, ok := p.byOwner[owner]
	if !ok {
		return 0, false
	}
	delete(p.byOwner, owner)
	delete(p.holder, i)
	if i < p.hint {
		p.hint = i
	}
	return i, true
}

func (p *pool) len() int { return len(p.byOwner) }

// capacity is how many indexes the pool gives in all.
func (p *pool) capacity() int { return int(p.last - p.first + 1) }
