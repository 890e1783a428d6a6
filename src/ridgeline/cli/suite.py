"""``ridgeline suite ...``: list the built-in task suites and materialise their tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ridgeline.cli._app import app, console

suite_app = typer.Typer(help="List and build procedurally generated task suites.", no_args_is_help=True)
app.add_typer(suite_app, name="suite")


@suite_app.command("list")
def list_() -> None:
    """Show every built-in suite: name, version, domains and what it holds."""
    from ridgeline.tasks.suites import list_suites

    table = Table("name", "version", "domains", "default n", "description")
    for s in list_suites():
        table.add_row(s.name, f"v{s.version}", ", ".join(s.domains), str(s.default_n), s.description)
    console.print(table)


@suite_app.command("build")
def build(
    name: Annotated[str, typer.Argument(help="Suite name, e.g. starter or terminal-v1.")],
    out: Annotated[Path, typer.Option("--out", help="New or empty directory for the task directories.")],
    n: Annotated[int | None, typer.Option("--n", help="Number of tasks (default: the suite's own).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed; the same seed gives the same bytes.")] = 0,
) -> None:
    """Materialise the first N tasks of suite NAME for SEED into OUT."""
    from ridgeline.tasks.suites import build_suite, get_suite

    suite = get_suite(name)
    paths = build_suite(suite.id, n, seed, out)
    console.print(f"[green]built[/] {len(paths)} tasks of {suite.id} (seed {seed}) in {out}", highlight=False)
