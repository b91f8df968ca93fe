"""Stage 3, the runs: which target this host is, rows.json handed to the suites in the target's image (or on
this host), one isolated process per row, and the exact command that re-runs one row."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["artefact", "execute", "exit_status", "host", "rerun", "run_spec", "run_verb", "schedule"]
