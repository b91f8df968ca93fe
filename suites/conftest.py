"""Every suite under suites/ runs with the harness plugin (python -m ci run also passes -p harness.plugin)."""

pytest_plugins = ["harness.plugin"]
