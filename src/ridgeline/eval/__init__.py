"""Evaluation: statistics with confidence intervals, paired comparison of runs, the HTML report."""

from ridgeline.eval.compare import Comparison, PairedStats, TaskPair, compare_runs, mcnemar_exact_p
from ridgeline.eval.metrics import (
    bootstrap_mean_ci,
    load_results,
    pass_at_k,
    success_by_required_steps,
    summarize,
    wilson_interval,
)
from ridgeline.eval.report import write_report

__all__ = [
    "Comparison",
    "PairedStats",
    "TaskPair",
    "bootstrap_mean_ci",
    "compare_runs",
    "load_results",
    "mcnemar_exact_p",
    "pass_at_k",
    "success_by_required_steps",
    "summarize",
    "wilson_interval",
    "write_report",
]
