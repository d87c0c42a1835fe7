//go:build tools

// Package tools records the command built from this module so that
// `go mod tidy` keeps its dependencies in go.sum.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
