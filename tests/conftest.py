pytest_plugins = ["grader.plugin"]
