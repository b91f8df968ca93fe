"""The rules a stack is checked by, across its fields and files: where a change comes from (`provenance`: its upstream
PR, merge commit, commits, what it is stacked on), a matrix's include entries against their change (`pins`), and which
model may enter which track, on which target (`eligibility`), which the plan asks too."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = []  # none: the loader and the plan ask them
