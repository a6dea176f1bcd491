"""Kernel tasks: one module per task, each with a jnp reference and a Pallas
solution, plus generated families (kernels_pallas/generated).

This package knows nothing of leap_jax. See registry.py for the task
contract and task_sets.py for task-set names ("train", "gen:eval", ...).
"""

from kernels_pallas.registry import Task, all_tasks, get_task, task_ids
from kernels_pallas.task_sets import eval_set_for, resolve_tasks, split_of

__all__ = ["Task", "all_tasks", "eval_set_for", "get_task", "resolve_tasks", "split_of",
           "task_ids"]
