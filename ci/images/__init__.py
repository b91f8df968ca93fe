"""Stage 2, the images: one per target, built hermetically from hashed locks, kernels baked ahead of time,
verified without a GPU, and baked on the target's devices."""
