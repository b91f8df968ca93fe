"""Whether a change the fork lacks (or a follow-up it lacks) would port onto the fork's ref today, and the port made.
Upstream's commits that make it (`commits`), tried in a scratch index and object store (`scratch`, `apply`), their files
read against the fork's tree first (`patch_files`); where it conflicts and why (`hunks`, `blame`, `why`), what it needs
first (`prerequisites`), how settled upstream is (`stability`); decided once per scope (`decision`), said in words and
commands (`words`, `command_line`), and made on a branch of its own (`make`), or first tried on a scratch ref
(`tried`: what was tried, as the report records it). The verdict's model, `ci.upstream.readiness`, sits beside the
answer that carries it (`ci.upstream.state`)."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["command_line", "decision", "make", "patch_files", "tried", "words"]
