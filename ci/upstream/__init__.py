"""Each imported change's upstream and rebase state in a real fork checkout, from git alone (`ci upstream`)."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["carries_write", "checkout", "holds", "kept", "port", "readiness", "release", "scope", "state"]
