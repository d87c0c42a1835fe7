pytest_plugins = ["fixtures.repos"]
