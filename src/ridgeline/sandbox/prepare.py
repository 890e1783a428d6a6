"""Sandboxes for tasks: a task's ``[environment]`` becomes a sandbox config, and setup.sh runs once."""

from __future__ import annotations

from typing import Any

from ridgeline.errors import TaskSetupError
from ridgeline.sandbox.base import Sandbox, SandboxConfig
from ridgeline.tasks.loader import Task

DEFAULT_SETUP_TIMEOUT = 600.0


def task_sandbox_config(task: Task, **overrides: Any) -> SandboxConfig:
    """The sandbox config for ``task``: its [environment] limits, workdir and image, its files, its
    ``[ridgeline] env``; tasks with a ``[ridgeline] dockerfile`` get the container backend."""
    rl = task.spec.ridgeline
    base: dict[str, Any] = {"files_dir": task.files_dir, "env": dict(rl.env)}
    if rl.dockerfile:
        base["type"] = "docker"
        base["dockerfile"] = task.path / rl.dockerfile
    base.update(overrides)
    return SandboxConfig.from_environment(task.spec.environment, **base)


def run_setup(task: Task, sandbox: Sandbox) -> None:
    """Run ``environment/setup.sh`` (when present) inside ``sandbox``, in the workdir.

    Raises:
        TaskSetupError: the script exited non-zero or timed out.
    """
    script = task.setup_script
    if not script.is_file():
        return
    extra = task.spec.environment.model_extra or {}
    timeout = float(extra.get("build_timeout_sec", DEFAULT_SETUP_TIMEOUT))
    r = sandbox.exec(
        "cat > /tmp/.rl-setup.sh && sh /tmp/.rl-setup.sh </dev/null; "
        'rc=$?; rm -f /tmp/.rl-setup.sh; exit "$rc"',
        stdin=script.read_bytes(),
        timeout=timeout,
    )
    if not r.ok:
        tail = (r.stdout + r.stderr).strip()[-1500:]
        raise TaskSetupError(f"{script}: setup failed with exit code {r.exit_code}: {tail}")


def open_task_sandbox(task: Task, **overrides: Any) -> Sandbox:
    """Create a sandbox for ``task`` and run its setup script; the caller closes it."""
    from ridgeline.sandbox import create

    sb = create(task_sandbox_config(task, **overrides))
    try:
        run_setup(task, sb)
    except BaseException:
        sb.close()
        raise
    return sb
