"""``ridgeline run`` (one trial) and ``ridgeline eval`` (a suite, k times, with statistics)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from ridgeline.cli._app import app, console


def _fmt_rate(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ci(ci: list[float] | None) -> str:
    return "" if not ci else f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


@app.command("run")
def run(
    task_dir: Annotated[Path, typer.Argument(help="The task directory.")],
    agent: Annotated[str, typer.Option("--agent", "-a", help="Policy spec: oracle, nop, openai:MODEL, ...")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Trial directory.")] = None,
) -> None:
    """Run one trial of AGENT on TASK_DIR and print the outcome and where the trajectory is."""
    from ridgeline.eval.trial import run_trial
    from ridgeline.policies import parse_policy_spec
    from ridgeline.tasks import load_task

    task = load_task(task_dir)
    cfg = parse_policy_spec(agent)
    out = output or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{task.name}"
    rec = run_trial(task, cfg, out)
    colour = "green" if rec["passed"] else ("yellow" if rec["status"] == "infra_fail" else "red")
    verdict = "passed" if rec["passed"] else ("infra_fail" if rec["status"] == "infra_fail" else "failed")
    console.print(
        f"[{colour}]{verdict}[/] {task.name}: status={rec['status']} reward={rec['reward']} "
        f"steps={rec['steps']} wall={rec['wall_s']:.2f}s",
        highlight=False,
    )
    if rec.get("error"):
        console.print(f"  error: {rec['error']}", highlight=False, soft_wrap=True)
    console.print(f"  trajectory: {out / 'trajectory.json'}", highlight=False)
    raise typer.Exit(0 if rec["status"] != "infra_fail" else 2)


@app.command("eval")
def eval_(
    tasks: Annotated[list[Path], typer.Argument(help="Task directories, or folders of them.")],
    agent: Annotated[str, typer.Option("--agent", "-a", help="Policy spec: oracle, nop, openai:MODEL, ...")],
    k: Annotated[int, typer.Option("-k", min=1, help="Trials per task (for pass@k).")] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Trials at once.")] = 4,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Run directory.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Finish an interrupted run in --output.")] = False,
    fail_below: Annotated[
        float | None, typer.Option("--fail-below", min=0.0, max=1.0, help="Exit 1 if the pass rate is lower.")
    ] = None,
) -> None:
    """Evaluate AGENT on TASKS, k times each, and write OUTPUT/results.json with confidence intervals."""
    from ridgeline.eval.runner import run_eval
    from ridgeline.policies import parse_policy_spec
    from ridgeline.tasks import discover_tasks, load_task

    loaded = [load_task(p) for p in discover_tasks(tasks)]
    cfg = parse_policy_spec(agent)
    out = output or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-eval"
    with Progress(
        TextColumn("[bold]eval[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as bar:
        bid = bar.add_task("eval", total=len(loaded) * k, stats="")

        def on_trial(p: Any, rec: dict[str, Any]) -> None:
            bar.update(bid, completed=p.done, stats=f"pass {_fmt_rate(p.pass_rate)}  infra {p.infra}")

        data = run_eval(loaded, cfg, out, k=k, concurrency=concurrency, resume=resume, on_trial=on_trial)
    print_summary(data["summary"])
    console.print(f"results: {out / 'results.json'}", highlight=False)
    rate = data["summary"].get("pass_rate")
    if fail_below is not None and (rate is None or rate < fail_below):
        console.print(f"[red]pass rate {_fmt_rate(rate)} is below --fail-below {fail_below:.3f}[/]")
        raise typer.Exit(1)


def print_summary(s: dict[str, Any]) -> None:
    """Print a run's summary as a table."""
    t = Table(title="summary", show_header=False)
    t.add_row("tasks / trials", f"{s.get('n_tasks')} / {s.get('n_trials')}")
    t.add_row("pass rate (95% CI)", _fmt_rate(s.get("pass_rate")) + _ci(s.get("pass_rate_ci95")))
    for kk, v in (s.get("pass_at_k") or {}).items():
        t.add_row(f"pass@{kk}", _fmt_rate(v))
    if s.get("mean_reward") is not None:
        t.add_row("mean reward", f"{s['mean_reward']:.3f}")
    t.add_row("infra failures", str(s.get("n_infra_fail")))
    t.add_row("tool-call accuracy", _fmt_rate(s.get("tool_call_accuracy")))
    steps = s.get("steps_to_success") or {}
    if steps.get("median") is not None:
        t.add_row("steps to success (median)", f"{steps['median']:g}")
    tok = s.get("tokens") or {}
    t.add_row(
        "tokens (prompt/cached/completion)",
        f"{tok.get('prompt')}/{tok.get('cached')}/{tok.get('completion')}",
    )
    t.add_row("cost", f"${s.get('cost_usd') or 0:.4f}")
    t.add_row("wall", f"{s.get('wall_s')} s")
    for b in s.get("success_by_required_steps") or []:
        t.add_row(f"  {b['label']} required steps", f"{_fmt_rate(b.get('pass_rate'))} (n={b.get('n')})")
    for d, v in (s.get("by_domain") or {}).items():
        t.add_row(f"  {d}", f"{_fmt_rate(v.get('pass_rate'))}{_ci(v.get('pass_rate_ci95'))} (n={v.get('n')})")
    console.print(t)
