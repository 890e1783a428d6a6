"""``ridgeline sandbox ...`` and ``ridgeline image ...``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ridgeline.cli._app import app, console, console_err

sandbox_app = typer.Typer(help="Run commands in sandboxes.", no_args_is_help=True)
image_app = typer.Typer(help="Build environment images (read-only dependency layers).", no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(image_app, name="image")


@sandbox_app.command("exec", context_settings={"allow_interspersed_args": False})
def exec_(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).")],
    task: Annotated[
        Path | None, typer.Option("--task", help="Use this task's environment and files.")
    ] = None,
    allow_internet: Annotated[bool, typer.Option("--allow-internet", help="Share the host network.")] = False,
    memory_mb: Annotated[int | None, typer.Option("--memory-mb", min=16, help="Memory limit.")] = None,
    pids: Annotated[int | None, typer.Option("--pids", min=4, help="Process-count limit.")] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=0.01, help="Seconds; exit 124 after.")
    ] = None,
    image: Annotated[str | None, typer.Option("--image", help="Image name, spec file, or 'none'.")] = None,
) -> None:
    """Run one command in a fresh sandbox, stream its output, exit with its exit code (124 on timeout)."""
    from ridgeline.sandbox import SandboxConfig, create
    from ridgeline.sandbox.prepare import open_task_sandbox

    overrides: dict[str, object] = {}
    if allow_internet:
        overrides["allow_internet"] = True
    if memory_mb is not None:
        overrides["memory_mb"] = memory_mb
    if pids is not None:
        overrides["pids"] = pids
    if image is not None:
        overrides["image"] = image
    if task is not None:
        from ridgeline.tasks import load_task

        sb = open_task_sandbox(load_task(task), **overrides)
    else:
        sb = create(SandboxConfig.model_validate(overrides))
    with sb:
        sys.stdout.flush()
        sys.stderr.flush()
        code, timed_out = sb.exec_attached(command, timeout=timeout)
    if timed_out:
        console_err.print(f"[yellow]timed out after {timeout:g} s[/]")
    raise typer.Exit(code)


@image_app.command("build")
def build(
    spec: Annotated[
        Path | None, typer.Argument(help="Image spec (TOML); default: the default image.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when cached.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the image path.")] = False,
) -> None:
    """Build an environment image (cached by content hash) and print where it lives."""
    from ridgeline.sandbox.images import build_image, image_path, load_spec

    s = load_spec(spec)
    cached = image_path(s).is_dir() and not force
    path = build_image(s, quiet=True, force=force)
    if quiet:
        console.print(str(path), highlight=False)
    else:
        state = "cached" if cached else "built"
        console.print(
            f"[green]{state}[/] image {s.name} ({len(s.packages)} packages) at {path}", highlight=False
        )


@image_app.command("list")
def list_() -> None:
    """List the images in the cache."""
    from ridgeline.sandbox.images import cache_root

    root = cache_root()
    rows = (
        sorted(p.name for p in root.glob("*") if p.is_dir() and not p.name.startswith("."))
        if root.exists()
        else []
    )
    for name in rows:
        console.print(name)
    if not rows:
        console.print(f"no images in {root}")
