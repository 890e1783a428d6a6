"""Lazy imports of optional extras, failing with the exact install command."""

from __future__ import annotations

import importlib
from types import ModuleType

from ridgeline.errors import MissingExtraError


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"this feature needs the '{extra}' extra ({module} is not installed): "
            f"pip install 'ridgeline[{extra}]'"
        ) from exc
