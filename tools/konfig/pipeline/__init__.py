"""The orchestration the commands call: stack selection, cluster connections, concurrency and the
preview/apply/destroy flows.
"""
