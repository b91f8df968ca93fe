"""One change judged on two builds of the fork by the protocol a timing claim needs (`ci main`): the fork without the
change (`compare_without`: --compare-without, its protocol shared) or with its port tried (`try_port`: --try-port),
each build warmed once, the arms interleaved with the A/A arm."""
