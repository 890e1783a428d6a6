"""The ``ridgeline`` command. Subcommands are grouped by noun; each group lives in its own module.

User errors (:class:`~ridgeline.errors.RidgelineError`) print one line in red and exit 1; tracebacks
are reserved for bugs.
"""

from __future__ import annotations

import sys

from rich.text import Text

from ridgeline.cli._app import app, console_err
from ridgeline.errors import RidgelineError

# Each module registers its commands on `app` when imported (this order is the order of --help).
from ridgeline.cli import quickstart as _quickstart  # noqa: F401  isort: skip
from ridgeline.cli import task as _task  # noqa: F401  isort: skip
from ridgeline.cli import suite as _suite  # noqa: F401  isort: skip
from ridgeline.cli import sandbox as _sandbox  # noqa: F401  isort: skip
from ridgeline.cli import run as _run  # noqa: F401  isort: skip
from ridgeline.cli import report as _report  # noqa: F401  isort: skip
from ridgeline.cli import check as _check  # noqa: F401  isort: skip
from ridgeline.cli import train as _train  # noqa: F401  isort: skip
from ridgeline.cli import data as _data  # noqa: F401  isort: skip


def main() -> None:
    """Entry point: run the app (typer handles usage errors), turning user errors into one clear line."""
    try:
        app()
    except RidgelineError as exc:
        console_err.print(Text.assemble(("error: ", "bold red"), str(exc)), soft_wrap=True, highlight=False)
        sys.exit(1)
    except KeyboardInterrupt:
        console_err.print("[yellow]interrupted[/]")
        sys.exit(130)


__all__ = ["app", "main"]
