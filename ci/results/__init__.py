"""Stage 4, the results: JUnit read and merged into one result per planned row, a baseline to compare
against, and each imported change judged on its acceptance criteria."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = [
    "acceptance",
    "as_ported",
    "baseline",
    "criteria",
    "junit",
    "junit_read",
    "merge",
    "metrics",
    "node_ids",
    "sides",
    "stat_tests",
]
