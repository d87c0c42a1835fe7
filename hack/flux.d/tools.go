//go:build tools

// Package tools records the commands built from this module so that
// `go mod tidy` keeps their dependencies in go.sum.
package tools

import (
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/source-controller"
)
