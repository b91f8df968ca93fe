"""Stage 5, the report: the results and verdicts as report.md, report.html and report.json, drawn from one
set of tables and written atomically."""
