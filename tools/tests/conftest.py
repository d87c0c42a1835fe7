pytest_plugins = [
    "fixtures.repos",
    "fixtures.cluster",
    "fixtures.monorepo",
    "fixtures.github_server",
]
