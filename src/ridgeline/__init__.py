"""Ridgeline: build, verify, evaluate and post-train agents that finish long, multi-step work.

The nouns (see DESIGN.md): Task, Suite, Sandbox, Tool, Policy, Trial, Trajectory, Status, Reward, Run.
"""

from ridgeline.errors import RidgelineError

__version__ = "0.1.0"
__all__ = ["RidgelineError", "__version__"]
