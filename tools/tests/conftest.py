pytest_plugins = [
    "fixtures.repos",
    "fixtures.cluster",
    "fixtures.tofu",
    "fixtures.monorepo",
    "fixtures.github_server",
    "fixtures.forge",
    "fixtures.helm",
    "fixtures.flux",
]
