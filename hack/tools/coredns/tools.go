//go:build tools

// Package tools pins CoreDNS, whose kubernetes plugin answers clusterset.local
// names from ServiceImports with its multicluster option.
package tools

import _ "github.com/coredns/coredns"
