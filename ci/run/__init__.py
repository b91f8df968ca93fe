"""Stage 3, the runs: which target this host is, rows.json handed to the suites in the target's image (or on
this host), one isolated process per row, and the exact command that re-runs one row."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = [
    "caches",
    "commands",
    "costs",
    "estimate",
    "execute",
    "host",
    "host_aot",
    "outcome",
    "rerun_lines",
    "rounds",
    "rows_json_read",
    "run_spec",
    "scheduled",
]
