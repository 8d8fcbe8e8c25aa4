// Package e2e holds the end-to-end tests of mcs-syncer. They run against a
// local clusterset of real control planes (package test/testbed) that
// TestMain starts once for the whole package and tears down afterwards;
// `make e2e` runs them.
package e2e
