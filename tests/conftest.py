"""Shared fixtures. Real network calls are not made by the default test run; servers bind 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ridgeline.sandbox import Sandbox, SandboxConfig, create


@pytest.fixture
def sandbox_factory() -> Iterator[object]:
    """Create sandboxes that are closed at the end of the test: ``sb = sandbox_factory(**config)``."""
    made: list[Sandbox] = []

    def make(**kw: object) -> Sandbox:
        kw.setdefault("image", "none")
        sb = create(SandboxConfig.model_validate(kw))
        made.append(sb)
        return sb

    yield make
    for sb in made:
        sb.close()


@pytest.fixture
def sb(sandbox_factory: object) -> Sandbox:
    return sandbox_factory()  # type: ignore[operator,no-any-return]
