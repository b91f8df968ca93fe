"""Stage 4b, the history: every report's build remembered in one SQLite file (`store`), as typed records (`record`),
so that the report can say which failing rows are new, which are flaky (`flaky_rules`), and how each change's numbers
moved (`trends`). It reads the results' vocabulary and the stack's rule; the report reads it."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["flaky_rules", "join", "past", "record", "store", "trends"]
