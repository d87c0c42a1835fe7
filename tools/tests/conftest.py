pytest_plugins = ["fixtures.repos", "fixtures.cluster"]
