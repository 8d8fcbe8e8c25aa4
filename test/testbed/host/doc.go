// Package host holds what every part of the testbed needs of the machine
// it runs on: a free loopback port, the repository's root. It imports no
// other testbed package, so that every one of them may import it.
package host
