"""The Kubernetes runtime: the API client, plan, diff, ordering, health, inventory, lock and the
apply/prune/destroy engine.
"""
