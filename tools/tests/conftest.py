pytest_plugins = ["fixtures.repos", "fixtures.monorepo", "fixtures.cluster"]
