"""Tasks: Harbor-compatible task directories, their frozen spec, loader and content hash."""

from ridgeline.tasks.hashing import hash_tree
from ridgeline.tasks.loader import Task, discover_tasks, load_task, parse_spec
from ridgeline.tasks.spec import TaskSpec

__all__ = ["Task", "TaskSpec", "discover_tasks", "hash_tree", "load_task", "parse_spec"]
