"""Benchmarks of the whole flow (planning, per-row overhead, the report on 10,000 testcases, `ci upstream` on a
20,000-commit history) and the synthetic JUnit they and the tests read."""
