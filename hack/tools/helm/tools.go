//go:build tools

// Package tools pins helm, the package manager whose chart
// (charts/mcs-syncer) platform teams install mcs-syncer with: make test
// lints and renders the chart with it, and the e2e tests install, upgrade
// and uninstall with it (hack/tools/build.sh builds it into the tools
// cache).
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
