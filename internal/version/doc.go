// Package version is mcs-syncer's build identity: the version and the
// source revision the binary was built from, stamped by the linker
// (`make build`, `make image`), printed by `mcs-syncer --version` and
// exported as the mcs_syncer_build_info gauge.
package version
