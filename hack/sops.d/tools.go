//go:build tools

// Package tools records the commands built from this module so that
// `go mod tidy` keeps their dependencies in go.sum.
package tools

import (
	_ "filippo.io/age/cmd/age"
	_ "filippo.io/age/cmd/age-keygen"
	_ "github.com/getsops/sops/v3/cmd/sops"
)
