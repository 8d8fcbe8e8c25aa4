//go:build tools

// Package tools pins staticcheck and gocyclo for `make lint`.
package tools

import (
	_ "github.com/fzipp/gocyclo/cmd/gocyclo"
	_ "honnef.co/go/tools/cmd/staticcheck"
)
