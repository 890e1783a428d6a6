"""Sandboxes: isolated, resettable execution environments (see :mod:`ridgeline.sandbox.base`).

Backends: ``bwrap`` (default; bubblewrap, milliseconds) and ``docker``/``podman`` (containers).
"""

from __future__ import annotations

from ridgeline.sandbox.base import (
    TIMEOUT_EXIT_CODE,
    Bind,
    ExecResult,
    Sandbox,
    SandboxConfig,
    Snapshot,
)


def create(
    config: SandboxConfig | None = None, *, snapshot: Snapshot | None = None, **overrides: object
) -> Sandbox:
    """Create a sandbox with the backend named by ``config.type``, from ``snapshot`` when given."""
    cfg = config or SandboxConfig()
    if overrides:
        cfg = SandboxConfig.model_validate({**cfg.model_dump(), **overrides})
    backend: type[Sandbox]
    if cfg.type == "bwrap":
        from ridgeline.sandbox.bwrap import BwrapSandbox

        backend = BwrapSandbox
    else:
        from ridgeline.sandbox.container import ContainerSandbox

        backend = ContainerSandbox
    return backend.create(cfg, snapshot=snapshot)


__all__ = ["TIMEOUT_EXIT_CODE", "Bind", "ExecResult", "Sandbox", "SandboxConfig", "Snapshot", "create"]
