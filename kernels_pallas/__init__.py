"""Kernel tasks: one module per task, each with a jnp reference and a Pallas solution.

This package knows nothing of leap_jax. See registry.py for the task contract.
"""

from kernels_pallas.registry import Task, all_tasks, get_task, task_ids

__all__ = ["Task", "all_tasks", "get_task", "task_ids"]
