"""``ridgeline quickstart``: the README's main job, with an embedded default and no external services.

Today it builds the ``starter`` suite, checks that the reference solutions pass (the ``oracle``
agent) and that doing nothing fails (``nop``), evaluates both with confidence intervals, compares
them, and writes an HTML report. The RL post-training phases (issue: RL post-training) extend it.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ridgeline.cli._app import app, console


@app.command("quickstart")
def quickstart(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where everything is written.")] = Path(
        "runs/quickstart"
    ),
    n: Annotated[int, typer.Option("--n", min=5, help="Tasks in the starter suite.")] = 60,
    seed: Annotated[int, typer.Option("--seed", help="Suite seed.")] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Trials at once.")] = 8,
) -> None:
    """Build the starter suite, evaluate the oracle and nop agents on it, compare them, write a report."""
    from ridgeline.cli.run import print_summary
    from ridgeline.eval.compare import compare_runs
    from ridgeline.eval.metrics import load_results
    from ridgeline.eval.report import write_report
    from ridgeline.eval.runner import run_eval
    from ridgeline.policies import parse_policy_spec
    from ridgeline.tasks import load_task
    from ridgeline.tasks.suites import build_suite

    if output.exists():
        shutil.rmtree(output)
    output.mkdir(parents=True)
    phases: dict[str, float] = {}
    t0 = time.perf_counter()
    console.rule("[bold]1. build the starter suite")
    paths = build_suite("starter", n, seed, output / "tasks")
    tasks = [load_task(p) for p in paths]
    phases["build_s"] = time.perf_counter() - t0
    console.print(f"{len(tasks)} tasks in {output / 'tasks'}", highlight=False)

    runs: dict[str, Any] = {}
    for name in ("oracle", "nop"):
        console.rule(f"[bold]2. evaluate the {name} agent")
        t = time.perf_counter()
        data = run_eval(tasks, parse_policy_spec(name), output / name, concurrency=concurrency)
        phases[f"eval_{name}_s"] = time.perf_counter() - t
        print_summary(data["summary"])
        runs[name] = data
    console.rule("[bold]3. compare and report")
    cmp = compare_runs(load_results(output / "nop"), load_results(output / "oracle"))
    diff = cmp.overall.diff or 0.0
    console.print(f"oracle vs nop: {cmp.overall.verdict} (Δ pass rate {diff:+.3f})", highlight=False)
    report = write_report(output / "oracle")
    phases["total_s"] = time.perf_counter() - t0
    summary = {
        "oracle": runs["oracle"]["summary"],
        "nop": runs["nop"]["summary"],
        "phases": {k: round(v, 2) for k, v in phases.items()},
    }
    (output / "quickstart.json").write_text(json.dumps(summary, indent=2))
    console.print(f"report: {report}\nsummary: {output / 'quickstart.json'}", highlight=False)
