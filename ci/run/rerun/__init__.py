"""One row or test run again, from a report or a results folder alone: the lines that re-run it and the block around
them (`lines`), the `ci repro` verb (`repro_verb`), and the two documents from elsewhere they read, as data
(`report_read`, `rows_json_read`)."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["lines", "repro_verb", "rows_json_read"]
