"""What changed: git, snapshots of a commit or the work tree, the KCL import graph, affected and
pending stacks.
"""
