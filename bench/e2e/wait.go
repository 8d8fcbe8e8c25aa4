package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// waitFor calls look every 100 ms until it reports done, and returns how
// long that took. It waits as long as the work makes progress: look also
// returns what it saw (counts of what is done so far), and waitFor gives
// up only when that has not changed for stall, with an error naming what
// it waited for, for how long, and what it saw last. A fixed deadline
// failed runs on a loaded machine while the API servers were still
// working through the objects ("timed out after 8m20s waiting for the
// write floor's namespace deleted" at load 10–30).
func waitFor(ctx context.Context, what string, stall time.Duration, look func() (done bool, state string)) (time.Duration, error) {
	began := time.Now()
	last, changed := "", began
	for {
		done, state := look()
		if done {
			return time.Since(began), nil
		}
		if state != last {
			last, changed = state, time.Now()
		}
		if time.Since(changed) > stall {
			return time.Since(began), fmt.Errorf("gave up waiting for %s after %s: no progress for %s; last seen: %s",
				what, time.Since(began).Round(time.Second), stall, orNothing(last))
		}
		select {
		case <-ctx.Done():
			return time.Since(began), fmt.Errorf("waiting for %s (last seen: %s): %w", what, orNothing(last), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func orNothing(state string) string {
	if state == "" {
		return "nothing"
	}
	return state
}

// errState is the state of a look that failed with err, or succeeded
// with state.
func errState(err error, state string) string {
	if err != nil {
		return err.Error()
	}
	return state
}

// convergeStall is how long a convergence may show no progress at all
// (no import, slice or endpoint more in any consumer) before its wait
// gives up.
const convergeStall = 5 * time.Minute

// allComplete looks at every view: done when every one is, and the state
// of each.
func allComplete(views []*importView, look func(*importView) (bool, string)) (bool, string) {
	all := true
	var states []string
	for _, v := range views {
		done, state := look(v)
		all = all && done
		states = append(states, state)
	}
	return all, strings.Join(states, " | ")
}

// outstanding is a look at the changes sent but not yet seen everywhere.
func outstanding(tr *tracker) func() (bool, string) {
	return func() (bool, string) {
		n := tr.outstanding()
		return n == 0, fmt.Sprintf("%d changes not yet seen everywhere", n)
	}
}
