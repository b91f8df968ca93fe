"""Buildkite: the pipeline made from the plan, and the gate that reads the report's verdicts."""
