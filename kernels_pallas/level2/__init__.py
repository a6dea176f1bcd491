"""Level 2 tasks."""
