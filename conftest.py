# The grader's pytest plugin: --impl, --suite, points and the score table. It is registered
# here, at the root, so that `pytest --impl DIR` is understood before test paths are read.
pytest_plugins = ["grader.plugin"]
