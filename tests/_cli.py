"""Run the real ``ridgeline`` entry point in-process (shared by the CLI tests)."""

from __future__ import annotations

import sys

import pytest

from ridgeline.cli import main


def run_cli(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """Run ``ridgeline ARGS`` through the real entry point; return (exit code, stdout + stderr)."""
    monkeypatch.setattr(sys, "argv", ["ridgeline", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out + err
