"""The container backend behind the same interface. Skipped where no docker engine runs (as on CI)."""

from __future__ import annotations

import pytest

from ridgeline.errors import SandboxUnavailableError
from ridgeline.sandbox import SandboxConfig, create
from ridgeline.sandbox.container import engine

try:
    engine("docker")
    _ENGINE = ""
except SandboxUnavailableError as exc:
    _ENGINE = str(exc)

needs_engine = pytest.mark.skipif(bool(_ENGINE), reason=_ENGINE or "engine present")


@pytest.mark.container
@needs_engine
def test_container_lifecycle() -> None:
    with create(SandboxConfig(type="docker", docker_image="python:3.11-slim")) as sb:
        r = sb.exec("echo hi; exit 3")
        assert (r.exit_code, r.stdout) == (3, "hi\n")
        sb.write_file("a.txt", "x")
        assert sb.read_file("a.txt") == b"x"
        snap = sb.snapshot()
        sb.exec("rm a.txt")
        sb.restore(snap)
        assert sb.read_file("a.txt") == b"x"
        assert sb.exec("sleep 30", timeout=1).timed_out


def test_missing_engine_is_a_clear_error() -> None:
    with pytest.raises(SandboxUnavailableError, match="no-such-engine is not installed"):
        engine("no-such-engine")
