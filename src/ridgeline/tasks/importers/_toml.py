"""A small TOML writer for the ``task.toml`` files the importers produce.

The standard library reads TOML (``tomllib``) but does not write it. Task files need only a subset:
tables of scalars, arrays, nested tables and arrays of tables. Output is deterministic (keys in
insertion order), and :func:`dumps` followed by ``tomllib.loads`` gives back the same data.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _key(k: str) -> str:
    return k if _BARE_KEY.match(k) else _string(k)


def _string(s: str) -> str:
    out = []
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list | tuple) and bool(v) and all(isinstance(x, Mapping) for x in v)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{_key(str(k))} = {_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write a {type(v).__name__} as TOML")


def _table(lines: list[str], path: list[str], data: Mapping[str, Any], *, header: bool) -> None:
    scalars = [(k, v) for k, v in data.items() if not isinstance(v, Mapping) and not _is_table_array(v)]
    tables = [(k, v) for k, v in data.items() if isinstance(v, Mapping)]
    arrays = [(k, v) for k, v in data.items() if _is_table_array(v)]
    if header and (scalars or not (tables or arrays)):
        if lines:
            lines.append("")
        lines.append("[" + ".".join(_key(p) for p in path) + "]")
    lines.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars)
    for k, v in tables:
        _table(lines, [*path, k], v, header=True)
    for k, items in arrays:
        for item in items:
            if lines:
                lines.append("")
            lines.append("[[" + ".".join(_key(p) for p in [*path, k]) + "]]")
            _table(lines, [*path, k], item, header=False)


def dumps(data: Mapping[str, Any]) -> str:
    """Serialise ``data`` (str keys; str, int, float, bool, date, list and dict values) as TOML."""
    lines: list[str] = []
    _table(lines, [], data, header=False)
    return "\n".join(lines) + "\n"
