"""The kernel environment: checks, verifies and times candidate kernels."""
