"""Stage 1c: the fork under test. Its checkout and what it holds (`source`), its vLLM as an overlay bundle over the
base release (`bundle`), the fork without one change (`ablate`), a port tried on a scratch ref (`port_trial`), and that
bundle installed on a bare host (`site`)."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["ablate", "bundle_pair", "fork_plan", "fork_verbs", "port_trial", "site", "source"]
