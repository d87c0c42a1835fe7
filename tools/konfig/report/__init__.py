"""What people read: preview rendering, the pull-request report and the apply summary."""
