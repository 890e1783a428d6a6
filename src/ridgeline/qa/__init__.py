"""Quality assurance for environments: ``ridgeline check`` (see :mod:`ridgeline.qa.check`).

A task is judged by static checks (:mod:`ridgeline.qa.static`) and by trials of the oracle, the nop
agent, its wrong solutions and hack probes (:mod:`ridgeline.qa.probes`), each run through the real
trial pipeline; the verdict is bound to the task's content hash.
"""

from ridgeline.qa.check import CheckOptions, TaskReport, check_tasks, results_json, summarize
from ridgeline.qa.probes import HACK_PROBES, ProbeConfig, ProbePolicy
from ridgeline.qa.static import Problem, Verdict, read_by_tests, static_checks

__all__ = [
    "HACK_PROBES",
    "CheckOptions",
    "ProbeConfig",
    "ProbePolicy",
    "Problem",
    "TaskReport",
    "Verdict",
    "check_tasks",
    "read_by_tests",
    "results_json",
    "static_checks",
    "summarize",
]
