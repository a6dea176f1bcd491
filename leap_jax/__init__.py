"""leap-jax: LEAP multi-turn RL for writing JAX Pallas kernels."""
