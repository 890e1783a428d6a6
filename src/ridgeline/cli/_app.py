"""The root typer app and shared consoles."""

from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(
    name="ridgeline",
    help="Build, verify, evaluate and post-train agents that finish long, multi-step work.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
console_err = Console(stderr=True)
