"""Decide whether a Dockerfile can run on the local backend, and what it becomes there.

A Dockerfile runs locally when it is a plain base image plus ``WORKDIR`` / ``COPY`` / ``ENV`` (and
``RUN mkdir`` of folders in the workdir): the local backend already provides a Debian system with
Python, so such an image adds nothing but files, a working directory and environment variables.
:func:`plan_dockerfile` reads the file without running anything and returns a :class:`DockerPlan`;
each reason in ``DockerPlan.reasons`` is one thing that needs a real container build (a package
install, a multi-stage build, a base image with other software, ``ADD``, ``USER``...). An empty list
means the local backend can run it.

Parsing follows the Dockerfile reference for what matters here: instructions are case-insensitive,
a trailing backslash continues a line, comment lines are dropped (also inside continuations),
``COPY`` takes shell-style or JSON-array arguments, and ``$VAR`` / ``${VAR}`` expand from earlier
``ARG`` defaults and ``ENV`` values. A variable the base image would have to provide (``$PATH``)
cannot be resolved statically and makes the file a container one.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field

#: Base images whose software the local backend stands in for (a Debian/Ubuntu system with Python).
#: Matched against the repository part of the image name, without registry or tag.
LOCAL_BASE_IMAGES = re.compile(
    r"^(?:library/)?(?:python|debian|ubuntu|buildpack-deps|alpine|busybox)$"
    r"|^laude-institute/t-bench/(?:python-3-\d+|ubuntu-\d+-\d+)$"
)

#: Instructions that do not change the files or the environment an agent sees.
_IGNORED = {"LABEL", "MAINTAINER", "EXPOSE", "CMD", "STOPSIGNAL", "HEALTHCHECK"}

_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_MKDIR = re.compile(r"^mkdir(?:\s+-p|\s+--parents)*((?:\s+[^\s;&|<>`$()'\"\\]+)+)$")


@dataclass(frozen=True)
class Instruction:
    lineno: int
    keyword: str
    args: str


@dataclass(frozen=True)
class Copy:
    """``COPY`` of ``sources`` (relative to the build context) to the absolute path ``dest``."""

    lineno: int
    sources: tuple[str, ...]
    dest: str
    #: The destination is a directory (several sources, or a trailing slash).
    dest_is_dir: bool
    chmod: int | None = None


@dataclass
class DockerPlan:
    """What a Dockerfile amounts to on the local backend."""

    base_image: str | None = None
    #: The final ``WORKDIR`` (None when the file sets none).
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    copies: list[Copy] = field(default_factory=list)
    mkdirs: list[str] = field(default_factory=list)
    #: Why the file needs a container build; empty when the local backend can run it.
    reasons: list[str] = field(default_factory=list)

    @property
    def local(self) -> bool:
        return not self.reasons


def parse_dockerfile(text: str) -> list[Instruction]:
    """Split a Dockerfile into instructions (continuations joined, comments and blanks dropped)."""
    out: list[Instruction] = []
    parts: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not parts and (not line or line.startswith("#")):
            continue
        if parts and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if not parts:
            start = n
        if line.endswith("\\"):
            parts.append(line[:-1].strip())
            continue
        parts.append(line)
        joined = " ".join(p for p in parts if p)
        parts = []
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(start, keyword.upper(), args.strip()))
    if parts:
        joined = " ".join(p for p in parts if p)
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(start, keyword.upper(), args.strip()))
    return out


def _short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _image_repo(image: str) -> str:
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    first, sep, rest = name.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        name = rest  # drop the registry host
    return name


class _Vars:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def expand(self, text: str) -> tuple[str, list[str]]:
        """Expand ``$X`` / ``${X}``; returns the text and the names that could not be resolved."""
        missing: list[str] = []

        def sub(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(2)
            if name in self.values:
                return self.values[name]
            missing.append(name)
            return m.group(0)

        return _VAR.sub(sub, text), missing


def _split_args(args: str) -> list[str] | None:
    if args.startswith("["):
        try:
            value = json.loads(args)
        except json.JSONDecodeError:
            return None
        if isinstance(value, list) and all(isinstance(x, str) for x in value):
            return value
        return None
    try:
        return shlex.split(args, posix=True)
    except ValueError:
        return None


def _abs(path: str, cwd: str) -> str:
    return posixpath.normpath(posixpath.join(cwd, path))


def _env_pairs(args: str) -> list[tuple[str, str]] | None:
    words = _split_args(args) if not args.startswith("[") else None
    if not words:
        return None
    if "=" not in words[0]:
        key, _, value = args.partition(" ")  # legacy form: ENV KEY the rest of the line
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        return [(key, value)]
    pairs = []
    for w in words:
        key, sep, value = w.partition("=")
        if not sep or not key:
            return None
        pairs.append((key, value))
    return pairs


def plan_dockerfile(text: str) -> DockerPlan:
    """Read a Dockerfile and decide whether the local backend can run it (see the module docstring)."""
    plan = DockerPlan()
    variables = _Vars()
    cwd = "/"
    froms = 0
    for ins in parse_dockerfile(text):
        at = f"line {ins.lineno}"
        kw, args = ins.keyword, ins.args
        if kw == "FROM":
            froms += 1
            if froms > 1:
                plan.reasons.append(f"multi-stage build (a second FROM at {at}) needs a container build")
                continue
            words = [w for w in args.split() if not w.startswith("--")]
            image, missing = variables.expand(words[0] if words else "")
            plan.base_image = image
            if missing:
                plan.reasons.append(f"FROM at {at} names its image through ${missing[0]}")
            elif not image:
                plan.reasons.append(f"FROM at {at} names no image")
            elif not LOCAL_BASE_IMAGES.match(_image_repo(image)):
                plan.reasons.append(
                    f"base image {image} brings software the local backend does not have "
                    "(it stands in for Debian/Ubuntu/Python images only)"
                )
        elif kw == "ARG":
            name, sep, default = args.partition("=")
            if sep:
                variables.values[name.strip()] = default.strip().strip("\"'")
        elif kw == "ENV":
            expanded, missing = variables.expand(args)
            pairs = _env_pairs(expanded) if not missing else None
            if missing:
                plan.reasons.append(
                    f"ENV at {at} uses ${missing[0]} from the base image, which only a container build knows"
                )
            elif pairs is None:
                plan.reasons.append(f"ENV at {at} could not be read: {_short(args)}")
            else:
                for k, v in pairs:
                    plan.env[k] = v
                    variables.values[k] = v
        elif kw == "WORKDIR":
            path, missing = variables.expand(args.strip().strip("\"'"))
            if missing or not path:
                plan.reasons.append(f"WORKDIR at {at} could not be resolved: {_short(args)}")
                continue
            cwd = _abs(path, cwd)
            plan.workdir = cwd
        elif kw == "COPY":
            _plan_copy(plan, variables, ins, cwd)
        elif kw == "RUN":
            matches = [_MKDIR.match(" ".join(c.split())) for c in args.split("&&")]
            dirs = [p for m in matches if m is not None for p in m.group(1).split()]
            if not all(matches):
                plan.reasons.append(f"RUN {_short(args, 50)} (at {at}) needs a container build")
                continue
            plan.mkdirs.extend(_abs(p, cwd) for p in dirs)
        elif kw == "ADD":
            plan.reasons.append(f"ADD at {at} (URLs, archive extraction) needs a container build")
        elif kw == "USER":
            plan.reasons.append(f"USER {_short(args, 30)} at {at} needs a container build")
        elif kw in _IGNORED:
            continue
        else:
            plan.reasons.append(f"{kw} at {at} needs a container build")
    if froms == 0:
        plan.reasons.append("the Dockerfile has no FROM instruction")
    return plan


def _plan_copy(plan: DockerPlan, variables: _Vars, ins: Instruction, cwd: str) -> None:
    at = f"line {ins.lineno}"
    words = ins.args.split()
    chmod: int | None = None
    while words and words[0].startswith("--"):
        flag, _, value = words.pop(0)[2:].partition("=")
        if flag == "from":
            plan.reasons.append(f"COPY --from at {at} (multi-stage build) needs a container build")
            return
        if flag == "chmod":
            try:
                chmod = int(value, 8)
            except ValueError:
                plan.reasons.append(f"COPY --chmod={value} at {at} is not an octal mode")
                return
        elif flag not in ("chown", "link"):
            plan.reasons.append(f"COPY --{flag} at {at} needs a container build")
            return
    expanded, missing = variables.expand(" ".join(words))
    if missing:
        plan.reasons.append(f"COPY at {at} uses ${missing[0]}, which only a container build knows")
        return
    parts = _split_args(expanded)
    if parts is None or len(parts) < 2:
        plan.reasons.append(f"COPY at {at} needs a source and a destination: {_short(ins.args)}")
        return
    *sources, dest = parts
    dest_is_dir = dest.endswith("/") or len(sources) > 1 or dest in (".", "./")
    plan.copies.append(Copy(ins.lineno, tuple(sources), _abs(dest, cwd), dest_is_dir, chmod))
