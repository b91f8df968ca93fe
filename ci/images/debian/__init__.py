"""The base image from Debian packages, for builders that cannot pull the pinned base: made offline (`bootstrap`) and
pinned by content, a lock of the exact package versions it holds (`debs`)."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = []  # none: the build, the rebuild and the image verbs ask them
