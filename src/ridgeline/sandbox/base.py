"""The Sandbox abstraction: an isolated, resettable place to run one trial's commands.

Lifecycle::

    sb = BwrapSandbox.create(config)      # or ridgeline.sandbox.create(config)
    r = sb.exec("ls", timeout=10)         # ExecResult; a non-zero exit is a normal result
    snap = sb.snapshot()                  # freeze the writable layer
    child = sb.fork()                     # a new sandbox starting from the current state
    sb.restore(snap)                      # roll back (kills running processes)
    sb.close()                            # idempotent; also run on Ctrl-C / interpreter exit

Failures are split by boundary: :class:`~ridgeline.errors.SandboxError` means the sandbox (the
infrastructure) failed; a command that runs and fails, or times out, returns an :class:`ExecResult`.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import os
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from ridgeline.tasks.spec import EnvironmentSection

#: Exit code reported for a command killed by its timeout (the convention of coreutils' timeout).
TIMEOUT_EXIT_CODE = 124


class Bind(BaseModel):
    """A host path made visible inside the sandbox."""

    model_config = ConfigDict(frozen=True)

    source: Path
    target: str
    writable: bool = False


class SandboxConfig(BaseModel):
    """Everything a backend needs to build a sandbox. Frozen, so it can be recorded with a trial."""

    model_config = ConfigDict(frozen=True)

    type: Literal["bwrap", "docker", "podman"] = "bwrap"
    workdir: str = "/app"
    #: Host directory whose contents seed the workdir (copied on first use, then shared read-only).
    files_dir: Path | None = None
    memory_mb: int = Field(default=1024, gt=0)
    storage_mb: int = Field(default=512, gt=0)
    pids: int = Field(default=256, gt=0)
    cpus: float = Field(default=1.0, gt=0)
    allow_internet: bool = False
    #: Name or path of an environment image (read-only dependency layer); None = the default image,
    #: "none" = host system layers only.
    image: str | None = None
    docker_image: str | None = None
    #: A Dockerfile the container backend builds (its folder is the build context).
    dockerfile: Path | None = None
    env: dict[str, str] = Field(default_factory=dict)
    binds: tuple[Bind, ...] = ()
    #: Host directory bound at /logs/agent (writable). None = a private empty one.
    agent_logs: Path | None = None
    #: Host directory bound at /logs/verifier (writable only when verifier_logs_writable).
    verifier_logs: Path | None = None
    verifier_logs_writable: bool = False

    @classmethod
    def from_environment(cls, section: EnvironmentSection, **overrides: object) -> SandboxConfig:
        """Build a config from a task's ``[environment]`` section."""
        data: dict[str, object] = {
            "workdir": section.workdir,
            "memory_mb": section.memory_mb,
            "storage_mb": section.storage_mb,
            "pids": section.pids,
            "cpus": section.cpus,
            "allow_internet": section.allow_internet,
            "image": section.image,
            "docker_image": section.docker_image,
        }
        data.update(overrides)
        return cls.model_validate(data)


@dataclass(frozen=True)
class ExecResult:
    """What a command did. ``exit_code`` is 124 when the timeout fired (``timed_out`` is then True)."""

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class Snapshot:
    """A frozen copy of a sandbox's writable layer (plus the layers it sat on)."""

    id: str
    #: Layers, topmost first; each a host directory usable as an overlay lower layer.
    layers: tuple[Path, ...]
    config: SandboxConfig
    #: Backend-specific reference (the container backend's committed image).
    ref: str | None = None
    _owners: list[object] = field(default_factory=list, compare=False, repr=False)


class Sandbox(abc.ABC):
    """An isolated execution environment for one trial. See the module docstring for the lifecycle."""

    config: SandboxConfig

    @classmethod
    @abc.abstractmethod
    def create(cls, config: SandboxConfig, *, snapshot: Snapshot | None = None) -> Self:
        """Create a sandbox, starting from ``snapshot`` when given.

        Raises:
            SandboxUnavailableError: the backend cannot run on this machine.
            SandboxError: creation failed.
        """

    @abc.abstractmethod
    def exec(
        self,
        command: str | list[str],
        *,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        """Run ``command`` (a shell string, run by ``/bin/sh -c``, or an argv list).

        Background processes it starts keep running until :meth:`close` or :meth:`restore`.
        On timeout every process the command started (including double-forked and ``setsid``'d ones)
        is killed and ``exit_code`` is 124.

        Raises:
            SandboxClosedError: the sandbox is closed.
            SandboxError: the command could not be started (infrastructure failure).
        """

    def exec_attached(
        self,
        command: str | list[str],
        *,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        stdout_fd: int = 1,
        stderr_fd: int = 2,
    ) -> tuple[int, bool]:
        """Run ``command`` writing its output to the given file descriptors; ``(exit_code, timed_out)``.

        Backends that can stream override this; the default runs :meth:`exec` and writes afterwards.
        """
        r = self.exec(command, timeout=timeout, env=env, cwd=cwd)
        os.write(stdout_fd, r.stdout.encode())
        os.write(stderr_fd, r.stderr.encode())
        return r.exit_code, r.timed_out

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes:
        """Read a file from the sandbox (absolute, or relative to the workdir).

        Raises:
            FileNotFoundError: no such file.
            SandboxError: the sandbox failed.
        """

    @abc.abstractmethod
    def write_file(self, path: str, data: str | bytes, mode: int = 0o644) -> None:
        """Write a file into the sandbox's writable layer, creating parent directories.

        Raises:
            PermissionError: the path lies outside the writable areas.
            SandboxError: the sandbox failed.
        """

    @abc.abstractmethod
    def snapshot(self) -> Snapshot:
        """Freeze the current writable layer. Running processes keep running."""

    @abc.abstractmethod
    def restore(self, snapshot: Snapshot) -> None:
        """Roll the writable layer back to ``snapshot``; every running process is killed."""

    def fork(self, snapshot: Snapshot | None = None) -> Self:
        """A new, independent sandbox starting from ``snapshot`` (default: this sandbox's state now)."""
        return type(self).create(self.config, snapshot=snapshot or self.snapshot())

    @abc.abstractmethod
    def close(self) -> None:
        """Kill everything and release resources. Idempotent; safe to call from any thread."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


_live: weakref.WeakSet[Sandbox] = weakref.WeakSet()
_live_lock = threading.Lock()


def track(sandbox: Sandbox) -> None:
    """Register a sandbox so that it is closed at interpreter exit even if the caller forgets."""
    with _live_lock:
        _live.add(sandbox)


@atexit.register
def close_all() -> None:
    """Close every live sandbox of this process (interrupts, interpreter exit)."""
    with _live_lock:
        boxes = list(_live)
    for sb in boxes:
        with contextlib.suppress(Exception):  # best effort: a backstop at exit
            sb.close()
