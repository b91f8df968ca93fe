"""Benchmarks of the whole flow (planning, per-row overhead, the report on 10,000 testcases) and the
synthetic JUnit they and the tests read."""
