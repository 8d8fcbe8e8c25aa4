// Package notify tells waiters that something they read may have changed,
// so that they look again when it does rather than on a timer: a Signal is
// a broadcast without a payload (what changed is read from its source), and
// Forward joins several sources into one Signal.
//
// The publisher follows the members' readers this way (which of them read
// whole publications only), and the import controller's start waits on the
// members' first passes this way.
package notify
