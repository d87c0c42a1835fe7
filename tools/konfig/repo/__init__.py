"""The repository on disk: discovery of projects and stacks, konfig.yaml, YAML and atomic file
writes.
"""
