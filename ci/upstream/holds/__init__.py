"""What a fork holds of each imported change, from git alone: one change's commits looked for (`found`), a port whose
patch was edited (`edited`), what the fork took back (`reverts`), the state, flags and fix that follow (`judge`), its
follow-up fixes (`follow_ups`), and every change at once (`classify`): the one answer every verb asks."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["classify"]
