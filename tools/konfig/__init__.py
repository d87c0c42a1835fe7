"""Konfig: a GitOps monorepo toolchain for KCL stacks on Kubernetes."""

__version__ = "0.2.0"
