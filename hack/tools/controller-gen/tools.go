//go:build tools

// Package tools pins controller-gen (sigs.k8s.io/controller-tools), which
// generates PublishedExport's DeepCopy and CRD (make generate).
package tools

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
