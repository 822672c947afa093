package jinja

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync/atomic"
)

// Each answer is bounded (bounds.go), but the process is not by that
// alone: forty renders of 16 MiB at once hold 640 MiB. So every render
// (one template executed) also reserves what it makes from one budget
// shared by the process, and stops when too little of it is left.
//
// A render reserves as it goes, each step what it needs, or as much as it
// holds already when that is more (from minReserve to maxReserve): an
// ordinary answer of a few KiB makes one reservation and one release, two
// atomic operations, and takes no lock. What it reserves is what it makes:
// the values charged to the answer as made (not those only read), and the
// text it writes. It gives all of it back when it ends, however it ends
// (an error, a panic).

// unlimitedBudget is the budget when the process has no memory limit.
const unlimitedBudget = 256 << 20

const (
	minReserve = 4 << 10
	maxReserve = 1 << 20
)

var (
	budgetLimit atomic.Int64 // bytes
	budgetInUse atomic.Int64 // bytes reserved by the renders under way
)

// ErrBudgetExhausted is what a render stops with when it cannot reserve;
// the error it returns wraps it.
var ErrBudgetExhausted = errors.New("the process-wide rendering budget is spent")

func init() { budgetLimit.Store(DefaultBudget()) }

// DefaultBudget is a quarter of the memory limit in force (GOMEMLIMIT,
// runtime/debug.SetMemoryLimit), or 256 MiB when there is none: rendered values are garbage soon after, and with the garbage
// collector's default target the heap grows to about twice what is live
// before a collection, which leaves half the limit to the rest of the
// process.
func DefaultBudget() int64 {
	if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 {
		return max(limit/4, 1)
	}
	return unlimitedBudget
}

// SetBudget sets the process-wide rendering budget, in bytes. Renders under
// way keep what they hold.
func SetBudget(bytes int64) { budgetLimit.Store(bytes) }

// Budget is the process-wide rendering budget, and how much of it the
// renders under way hold.
func Budget() (limit, inUse int64) { return budgetLimit.Load(), budgetInUse.Load() }

// reserve takes n bytes of the budget, or nothing when fewer are left: the
// count never goes past the limit, not even for a moment.
func reserve(n int64) bool {
	for {
		held := budgetInUse.Load()
		if held+n > budgetLimit.Load() {
			return false
		}
		if budgetInUse.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

// take charges n bytes made by the execution under way to the process-wide
// budget, reserving more when what it holds is spent. Once refused, the
// execution is refused everything else too, so that it stops however the
// template treats the first failure.
func (b *budget) take(n int) error {
	if b.refused {
		return ErrBudgetExhausted
	}
	b.used += n
	if b.used <= b.held {
		return nil
	}
	// A step ahead, so that a growing render asks rarely; failing that,
	// exactly what it needs, so that a render that fits is not refused.
	more := max(b.used-b.held, min(max(b.held, minReserve), maxReserve))
	if !reserve(int64(more)) {
		more = b.used - b.held
		if !reserve(int64(more)) {
			b.used -= n
			b.refused = true
			return ErrBudgetExhausted
		}
	}
	b.held += more
	return nil
}

// release gives back everything the execution reserved.
func (b *budget) release() {
	if b.held > 0 {
		budgetInUse.Add(-int64(b.held))
	}
	b.held, b.used, b.refused = 0, 0, false
}

// exhausted is the error of an execution the budget refused.
func exhausted() error {
	limit := budgetLimit.Load()
	size := fmt.Sprintf("%d MiB", limit>>20)
	if limit < 1<<20 {
		size = fmt.Sprintf("%d bytes", limit)
	}
	return fmt.Errorf("%w: of its %s, shared by the renders under way, too little is left for this one; try again", ErrBudgetExhausted, size)
}
