"""Level 3 tasks."""
