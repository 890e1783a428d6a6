"""The container backend: docker or podman behind the same :class:`Sandbox` interface.

For users who have a container engine (and tasks that need a Dockerfile-built image). Each sandbox
is one long-running container (``sleep infinity``) from ``docker_image`` (default
``python:3.11-slim``), with the task's limits mapped to ``--memory``, ``--pids-limit`` and ``--cpus``,
``--network none`` unless the task allows the internet, and the task's files copied into the workdir.
Commands run with ``docker exec``; snapshots are ``docker commit`` images.

Threat model: what the engine gives (namespaces, cgroups, seccomp, dropped capabilities). Differences
from the bwrap backend: a timeout kills the command's process group and session (a double-forked
``setsid`` process survives until ``close``); there is no size cap on the writable layer unless the
engine's storage driver supports ``--storage-opt size``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Self

from ridgeline.errors import SandboxClosedError, SandboxError, SandboxUnavailableError
from ridgeline.sandbox.base import TIMEOUT_EXIT_CODE, ExecResult, Sandbox, SandboxConfig, Snapshot, track

DEFAULT_IMAGE = "python:3.11-slim"


def engine(kind: str = "docker") -> str:
    """The engine binary for ``kind`` ("docker" or "podman"), if it runs; else SandboxUnavailableError."""
    exe = shutil.which(kind)
    if exe is None:
        raise SandboxUnavailableError(
            f"{kind} is not installed (the container backend needs a {kind} engine)"
        )
    proc = subprocess.run([exe, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SandboxUnavailableError(
            f"{kind} is installed but its engine is not running: {proc.stderr.strip()}"
        )
    return exe


def _build(exe: str, dockerfile: Path) -> str:
    """Build ``dockerfile`` (its folder is the context) once; the tag is its content hash."""
    from ridgeline.tasks.hashing import hash_tree

    tag = f"ridgeline-task:{hash_tree(dockerfile.parent).split(':')[-1]}"
    if subprocess.run([exe, "image", "inspect", tag], capture_output=True).returncode != 0:
        proc = subprocess.run(
            [exe, "build", "-t", tag, "-f", str(dockerfile), str(dockerfile.parent)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise SandboxError(f"{exe} build of {dockerfile} failed: {proc.stderr.strip()[-1500:]}")
    return tag


class ContainerSandbox(Sandbox):
    """A sandbox backed by one container."""

    def __init__(self, config: SandboxConfig, exe: str, image: str) -> None:
        self.config = config
        self._exe = exe
        self._image = image
        self.id = f"rl-{uuid.uuid4().hex[:12]}"
        self._closed = False
        self._n = 0

    @classmethod
    def create(cls, config: SandboxConfig, *, snapshot: Snapshot | None = None) -> Self:
        exe = engine("podman" if config.type == "podman" else "docker")
        image = (snapshot.ref if snapshot is not None else None) or config.docker_image or DEFAULT_IMAGE
        if snapshot is None and config.dockerfile is not None:
            image = _build(exe, config.dockerfile)
        sb = cls(config, exe, image)
        sb._start()
        track(sb)
        if snapshot is None and config.files_dir is not None and config.files_dir.is_dir():
            sb._docker("exec", sb.id, "mkdir", "-p", config.workdir)
            sb._docker("cp", f"{config.files_dir}/.", f"{sb.id}:{config.workdir}")
        return sb

    def _docker(self, *args: str, check: bool = True, **kw: object) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run([self._exe, *args], capture_output=True, **kw)  # type: ignore[call-overload]
        if check and proc.returncode != 0:
            raise SandboxError(
                f"{self._exe} {args[0]} failed: {proc.stderr.decode(errors='replace').strip()}"
            )
        return proc  # type: ignore[no-any-return]

    def _start(self) -> None:
        c = self.config
        args = [
            "run",
            "-d",
            "--name",
            self.id,
            "--init",
            "-w",
            c.workdir,
            "--memory",
            f"{c.memory_mb}m",
            "--pids-limit",
            str(c.pids),
            "--cpus",
            str(c.cpus),
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--tmpfs",
            f"/tmp:size={c.storage_mb}m",
        ]
        if not c.allow_internet:
            args += ["--network", "none"]
        for k, v in c.env.items():
            args += ["-e", f"{k}={v}"]
        for b in c.binds:
            args += ["-v", f"{b.source}:{b.target}:{'rw' if b.writable else 'ro'}"]
        if c.agent_logs is not None:
            args += ["-v", f"{c.agent_logs}:/logs/agent:rw"]
        if c.verifier_logs is not None:
            args += ["-v", f"{c.verifier_logs}:/logs/verifier:{'rw' if c.verifier_logs_writable else 'ro'}"]
        self._docker(*args, self._image, "sleep", "infinity")

    @property
    def closed(self) -> bool:
        return self._closed

    def exec(
        self,
        command: str | list[str],
        *,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        if self._closed:
            raise SandboxClosedError(f"sandbox {self.id} is closed")
        self._n += 1
        marker = f"/tmp/.rl-exec-{self._n}"
        argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
        # Run the command as a session leader whose id is recorded, so a timeout can kill its session.
        wrapped = ["setsid", "sh", "-c", f'echo $$ > {marker}; exec "$@"', "rl-exec", *argv]
        args = ["exec", "-i", "-w", cwd or self.config.workdir]
        for k, v in (env or {}).items():
            args += ["-e", f"{k}={v}"]
        data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                [self._exe, *args, self.id, *wrapped], input=data, capture_output=True, timeout=timeout
            )
            code, out, err, timed_out = proc.returncode, proc.stdout, proc.stderr, False
        except subprocess.TimeoutExpired as exc:
            kill = f'pkill -KILL -s "$(cat {marker})" || kill -KILL -- -"$(cat {marker})"'
            self._docker("exec", self.id, "sh", "-c", kill, check=False)
            code, timed_out = TIMEOUT_EXIT_CODE, True
            out, err = exc.stdout or b"", exc.stderr or b""
        except OSError as exc:
            raise SandboxError(f"{self._exe} exec failed: {exc}") from exc
        return ExecResult(
            code,
            out.decode(errors="replace"),
            err.decode(errors="replace"),
            time.perf_counter() - start,
            timed_out,
        )

    def read_file(self, path: str) -> bytes:
        p = path if path.startswith("/") else f"{self.config.workdir}/{path}"
        proc = self._docker("exec", self.id, "cat", "--", p, check=False)
        if proc.returncode != 0:
            raise FileNotFoundError(f"{p}: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout

    def write_file(self, path: str, data: str | bytes, mode: int = 0o644) -> None:
        p = path if path.startswith("/") else f"{self.config.workdir}/{path}"
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod "$2" -- "$1"'
        proc = self._docker(
            "exec",
            "-i",
            self.id,
            "sh",
            "-c",
            script,
            "rl-write",
            p,
            f"{mode:o}",
            input=data.encode() if isinstance(data, str) else data,
            check=False,
        )
        if proc.returncode != 0:
            raise PermissionError(f"{p}: {proc.stderr.decode(errors='replace').strip()}")

    def snapshot(self) -> Snapshot:
        ref = f"ridgeline-snapshot:{uuid.uuid4().hex[:12]}"
        self._docker("commit", self.id, ref)
        return Snapshot(id=ref, layers=(), config=self.config, ref=ref)

    def restore(self, snapshot: Snapshot) -> None:
        if snapshot.ref is None:
            raise SandboxError("this snapshot was not made by the container backend")
        self._docker("rm", "-f", self.id, check=False)
        self._image = snapshot.ref
        self._start()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        subprocess.run([self._exe, "rm", "-f", self.id], capture_output=True, env={**os.environ})
