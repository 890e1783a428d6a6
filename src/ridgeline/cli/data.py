"""``ridgeline filter`` (trajectories → training data) and ``ridgeline import`` (other benchmarks → tasks)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ridgeline.cli._app import app, console


@app.command("filter")
def filter_(
    runs: Annotated[list[Path], typer.Argument(help="Run directories written by `ridgeline eval -o RUN`.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Dataset directory (new or empty).")],
    keep_failed: Annotated[
        bool, typer.Option("--keep-failed", help="Keep trajectories whose reward is below 1.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite the dataset in a non-empty --out.")
    ] = False,
) -> None:
    """Turn the trajectories of RUNS into SFT-ready JSONL (OUT/sft.jsonl) and a manifest of what was
    dropped and why: infra failures, truncated episodes, failures, duplicates, and trajectories that
    touched the tests, the solution or the reward path."""
    from ridgeline.qa.filter import DROP_REASONS, MANIFEST_FILE, SFT_FILE, filter_runs

    report = filter_runs(runs, out, keep_failed=keep_failed, force=force)
    table = Table("", "trajectories", title=f"filter: {report.n_input} trajectories from {len(runs)} run(s)")
    table.add_row("[green]kept[/]", str(report.kept))
    for reason in DROP_REASONS:
        n = report.dropped.get(reason, 0)
        if reason == "failed" and keep_failed:
            continue
        table.add_row(f"dropped: {reason}", str(n))
    console.print(table)
    if report.tools_without_schema:
        names = ", ".join(sorted(report.tools_without_schema))
        console.print(f"[yellow]tools without a recorded schema (bare schema written):[/] {names}")
    console.print(
        f"dataset: {escape(str(out / SFT_FILE))}  manifest: {escape(str(out / MANIFEST_FILE))}",
        highlight=False,
        soft_wrap=True,
    )


@app.command("import")
def import_(
    kind: Annotated[str, typer.Argument(help="Source format: harbor, terminal-bench or humaneval.")],
    src: Annotated[Path, typer.Argument(help="Task directories (harbor, terminal-bench) or a JSONL file.")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Directory for the converted tasks (new or empty).")
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Replace the contents of a non-empty --out.")
    ] = False,
) -> None:
    """Convert tasks of another benchmark format (KIND) from SRC into Ridgeline task directories in
    OUT, and report what converted, on which backend, and what did not and why. Exits 1 only when
    nothing converted."""
    from ridgeline.tasks.importers import import_tasks

    report = import_tasks(kind, src, out, force=force)
    if report.converted:
        table = Table("task", "backend", "notes", title=f"converted {len(report.converted)} {kind} task(s)")
        for c in report.converted:
            colour = "green" if c.backend == "local" else "yellow"
            table.add_row(escape(c.name), f"[{colour}]{c.backend}[/]", escape("\n".join(c.notes)))
        console.print(table)
    if report.skipped:
        table = Table("source", "reason", title=f"not converted: {len(report.skipped)}")
        for s in report.skipped:
            table.add_row(escape(s.source), escape(s.reason))
        console.print(table)
    if not report.converted:
        console.print(
            f"[red]nothing converted[/] from {escape(str(src))}; {escape(str(out))} was left as it was",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
    local = sum(1 for c in report.converted if c.backend == "local")
    console.print(
        f"[green]imported[/] {len(report.converted)} task(s) into {escape(str(out))} ({local} local, "
        f"{len(report.converted) - local} container; {len(report.skipped)} not converted); "
        f"report: {escape(str(out / 'import.json'))}",
        highlight=False,
        soft_wrap=True,
    )
