"""``ridgeline task ...``: scaffold and validate task directories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ridgeline.cli._app import app, console
from ridgeline.errors import TaskError

task_app = typer.Typer(help="Create and validate task directories.", no_args_is_help=True)
app.add_typer(task_app, name="task")


@task_app.command("new")
def new(
    name: Annotated[str, typer.Argument(help="Task name; also the directory created.")],
    parent: Annotated[Path, typer.Option("--dir", help="Where to create the task directory.")] = Path("."),
) -> None:
    """Scaffold a valid task directory NAME."""
    from ridgeline.tasks.scaffold import scaffold_task

    path = scaffold_task(name, parent)
    console.print(f"[green]created[/] {path}")


@task_app.command("validate")
def validate(
    dirs: Annotated[list[Path], typer.Argument(help="Task directories, or folders of them.")],
) -> None:
    """Validate task directories; exit 1 listing every problem when any is invalid."""
    from ridgeline.tasks.loader import discover_tasks, load_task

    bad = good = 0
    paths: list[Path] = []
    for d in dirs:
        try:
            paths.extend(discover_tasks([d]))
        except TaskError as exc:
            console.print(f"[red]invalid[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            bad += 1
    for p in paths:
        try:
            t = load_task(p)
        except TaskError as exc:
            console.print(f"[red]invalid[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            bad += 1
        else:
            good += 1
            line = f"[green]ok[/]      {escape(str(p))}  [dim]{t.hash}[/]"
            console.print(line, highlight=False, soft_wrap=True)
    console.print(f"{good} valid, {bad} invalid")
    if bad:
        # SystemExit, not typer.Exit: under ``standalone_mode=False`` (see ``ridgeline.cli.main``)
        # typer.Exit becomes a return value and the process would exit 0.
        raise SystemExit(1)
