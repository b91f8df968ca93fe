"""Stage 5, the report: the results and verdicts as report.md, report.html and report.json, drawn from one
set of tables and written atomically."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["across", "report_verb", "write"]
