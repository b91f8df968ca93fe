"""The acceptance criteria: one registry entry each (`registry`: its id, name, what it reads, how it judges, what
blocks), what an entry is made of (`rule`), and the judges that need more than a line: the effect a change has against
the fork without it (`effect`) and its allowed regression against a baseline (`regression`)."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["registry"]
