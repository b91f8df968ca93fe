"""The bake as a portable artefact, for hosts without docker: every JIT cache of a target's runtime root, packed and
installed where its key is this host's (`jit_caches`), the kernels compiled into it ahead of time (`host_aot`), an
artefact from elsewhere read as data (`read`), and the rows its bake ran (`baked_rows`)."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["host_aot", "jit_caches"]
