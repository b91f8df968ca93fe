"""Which row runs when, and on which GPUs: rows packed onto a host's devices by memory (`packing`), started as devices
free up (`dispatch`), the GPUs a row gets (`gpus`) and the rows that shared one (`tenancy`); what each engine
configuration cost, measured (`costs`), looked up for the order and the ETA (`estimate`), and a timing protocol's rounds
(`rounds`)."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["costs", "dispatch", "estimate", "rounds"]
