// Package host holds what every part of the testbed needs of the machine
// it runs on: a free loopback port, the repository's root, polling, a
// process's liveness and resident memory, dual-stack flag values. It
// imports no other testbed package, so that every one of them may import
// it.
package host
