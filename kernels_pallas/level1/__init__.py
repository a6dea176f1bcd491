"""Level 1 tasks."""
