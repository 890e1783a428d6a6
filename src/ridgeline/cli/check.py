"""``ridgeline check``: environment quality inspection, one verdict per task hash."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ridgeline.cli._app import app, console

_COLOURS = {"ok": "green", "hackable": "magenta", "flaky": "yellow", "broken": "red", "invalid": "red"}


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


@app.command("check")
def check(
    tasks: Annotated[list[Path], typer.Argument(help="Task directories, or folders of them.")],
    oracle_runs: Annotated[
        int, typer.Option("--oracle-runs", "-n", min=1, help="Runs of the reference solution per task.")
    ] = 5,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Trials at once.")] = 8,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the verdicts as JSON to this file.")
    ] = None,
    probes: Annotated[
        str | None,
        typer.Option("--probes", help="Comma-separated hack probes to run (default: all of them)."),
    ] = None,
    screen: Annotated[
        bool,
        typer.Option(
            "--screen/--no-screen",
            help="Screen the probes that plant files in one trial first (--no-screen: each on its own).",
        ),
    ] = True,
    logs: Annotated[
        Path | None,
        typer.Option("--logs", help="Keep every trial's folder (trajectory, verifier logs) here."),
    ] = None,
) -> None:
    """Inspect TASKS: static checks, the oracle N times, nop, wrong solutions, reset, limits and hack
    probes. Prints a verdict per task (ok, broken, flaky, hackable, invalid); exits 1 unless all are ok."""
    from ridgeline.qa.check import CheckOptions, TaskReport, check_tasks, results_json
    from ridgeline.qa.probes import HACK_PROBES
    from ridgeline.tasks import discover_tasks

    paths = discover_tasks(tasks)
    chosen = (
        tuple(HACK_PROBES) if probes is None else tuple(p.strip() for p in probes.split(",") if p.strip())
    )
    options = CheckOptions(
        oracle_runs=oracle_runs, concurrency=concurrency, probes=chosen, screen=screen, logs_dir=logs
    )
    started = time.monotonic()
    with Progress(
        TextColumn("[bold]check[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("trials  {task.fields[stats]}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as bar:
        bid = bar.add_task("check", total=None, stats="")
        finished: list[TaskReport] = []

        def on_progress(done: int, total: int, report: TaskReport | None) -> None:
            if report is not None:
                finished.append(report)
                colour = _COLOURS[report.verdict]
                bar.console.print(
                    f"  [{colour}]{report.verdict:>8}[/] {escape(report.task)}", highlight=False
                )
            bad = sum(r.verdict != "ok" for r in finished)
            bar.update(
                bid,
                completed=done,
                total=total,
                stats=f"{len(finished)}/{len(paths)} tasks, {bad} not ok",
            )

        reports = check_tasks(paths, options, on_progress=on_progress)
    wall = time.monotonic() - started
    _print_table(reports)
    data = results_json(reports, options, wall)
    counts = data["summary"]["verdicts"]
    console.print(
        "  ".join(f"[{_COLOURS[v]}]{v}[/] {n}" for v, n in counts.items() if n) + f"   ({wall:.1f} s)",
        highlight=False,
    )
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
        console.print(f"verdicts: {json_out}", highlight=False)
    raise typer.Exit(0 if data["summary"]["ok"] else 1)


def _print_table(reports: list[Any]) -> None:
    t = Table(title="ridgeline check", show_lines=False)
    t.add_column("task", overflow="fold")
    t.add_column("hash", style="dim")
    t.add_column("verdict")
    t.add_column("oracle", justify="right")
    t.add_column("problems", overflow="fold")
    for r in reports:
        colour = _COLOURS[r.verdict]
        problems = "\n".join(escape(str(p)) for p in r.problems) or "-"
        if r.notes:
            problems += "".join(f"\n[dim]note: {escape(n)}[/]" for n in r.notes)
        t.add_row(
            escape(r.task),
            (r.task_hash or "-").removeprefix("sha256:")[:8],
            f"[{colour}]{r.verdict}[/]",
            f"{r.oracle_passes}/{r.oracle_runs}" if r.oracle_runs else "-",
            problems,
        )
    console.print(t)
