"""The forge (GitHub or Gitea) API: the pull-request comment."""
