"""Stage 2, the images: one per target, built hermetically from hashed locks, kernels baked ahead of time,
verified without a GPU, and baked on the target's devices."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["baked_layer", "build", "image_verbs", "lock", "push_pull", "verify"]
