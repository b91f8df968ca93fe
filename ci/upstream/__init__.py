"""Each imported change's upstream and rebase state in a real fork checkout, from git alone (`ci upstream`)."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = [
    "checkout", "classify", "kept", "port_check", "port_command", "port_files", "port_make", "port_text", "readiness",
    "record", "release", "scope", "state", "tried",
]  # fmt: skip
