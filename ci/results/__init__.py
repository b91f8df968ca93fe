"""Stage 4, the results: JUnit read and merged into one result per planned row, a baseline to compare
against, and each imported change judged on its acceptance criteria."""
