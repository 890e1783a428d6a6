"""Environment images: read-only dependency layers mounted under every sandbox that names them.

An image is a Python environment layered on Debian's system Python (``/usr/bin/python3``) plus pinned
packages, built once, content-hashed and cached. Inside a sandbox it is mounted read-only at
:data:`IMAGE_MOUNT` and its ``bin/`` leads ``PATH``, so ``python3`` and ``pytest`` are the image's
whatever Python the host happens to have. Because the spec is hashed together with the base
interpreter's version, the same task sees the same files on every machine that builds the same spec;
the agent and the verifier see the same image.

Spec (TOML)::

    name = "default"
    python = "/usr/bin/python3"
    packages = ["pytest==8.3.3", "numpy==2.1.3"]
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ridgeline.errors import ConfigError, SandboxError

IMAGE_MOUNT = "/opt/ridgeline/image"

DEFAULT_PACKAGES = ("pytest==8.3.3", "numpy==2.1.3")


class ImageSpec(BaseModel):
    """A declarative image spec."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default="default", pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    python: str = "/usr/bin/python3"
    packages: tuple[str, ...] = DEFAULT_PACKAGES

    def digest(self) -> str:
        return _digest(self)


@functools.lru_cache(maxsize=64)
def _digest(spec: ImageSpec) -> str:
    try:
        version = subprocess.run(
            [spec.python, "-c", "import sys; print(sys.version)"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise ConfigError(f"image {spec.name!r}: python {spec.python!r} does not run: {exc}") from None
    blob = json.dumps({"spec": spec.model_dump(mode="json"), "base": version}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cache_root() -> Path:
    """Where images live. As root: /var/cache/ridgeline/images, which the unprivileged sandbox uid can
    traverse (a home directory usually is not); otherwise ~/.cache/ridgeline/images."""
    root = os.environ.get("RIDGELINE_IMAGE_CACHE")
    if root:
        return Path(root)
    if os.geteuid() == 0:
        return Path("/var/cache/ridgeline/images")
    return Path(os.path.expanduser("~/.cache/ridgeline/images"))


def load_spec(path: str | Path | None) -> ImageSpec:
    """Load an image spec from a TOML file; None gives the default spec."""
    if path is None:
        return ImageSpec()
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: image spec file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None
    try:
        return ImageSpec.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise ConfigError(f"{p}: {'.'.join(map(str, e['loc'])) or 'spec'}: {e['msg']}") from None


def image_path(spec: ImageSpec) -> Path:
    return cache_root() / f"{spec.name}-{spec.digest()}"


def build_image(spec: ImageSpec, *, quiet: bool = False, force: bool = False) -> Path:
    """Build (or find in the cache) the image for ``spec``; returns its directory.

    The build happens in a temporary directory and is renamed into place, so concurrent builds and
    interrupted builds never leave a half-made image in the cache.
    """
    final = image_path(spec)
    if final.is_dir() and not force:
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        venv = tmp / "env"
        _run([spec.python, "-m", "venv", str(venv)], "create the virtual environment")
        if spec.packages:
            cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
            _run([*cmd, *(["-q"] if quiet else []), *spec.packages], "install the packages")
        _relocate(venv, IMAGE_MOUNT)
        (venv / "ridgeline-image.json").write_text(
            json.dumps(
                {"name": spec.name, "digest": spec.digest(), "packages": list(spec.packages)}, indent=2
            )
        )
        os.chmod(tmp, 0o755)
        if force and final.exists():
            shutil.rmtree(final)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process built it first
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SandboxError(f"image build: could not {what} ({' '.join(cmd)}):\n{proc.stderr[-2000:]}")


def _relocate(venv: Path, mount: str) -> None:
    """Rewrite script shebangs from the build path to the path the image is mounted at."""
    old = str(venv).encode()
    for f in (venv / "bin").iterdir():
        if f.is_symlink() or not f.is_file():
            continue
        data = f.read_bytes()
        if data.startswith(b"#!") and old in data.split(b"\n", 1)[0]:
            first, _, rest = data.partition(b"\n")
            f.write_bytes(first.replace(old, mount.encode()) + b"\n" + rest)
    cfg = venv / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace(str(venv), mount))


@functools.lru_cache(maxsize=64)
def resolve_image(name: str | None) -> Path | None:
    """The host directory of the image a sandbox mounts, or None for ``"none"``.

    ``None`` means the default image, built on first use. A path to a directory is used as is; a path
    to a TOML file is built from that spec.
    """
    if name == "none":
        return None
    if name is None or name == "default":
        return build_image(ImageSpec(), quiet=True) / "env"
    p = Path(name)
    if p.is_dir():
        return p
    if p.suffix == ".toml":
        return build_image(load_spec(p), quiet=True) / "env"
    matches = sorted(cache_root().glob(f"{name}-*"))
    if matches:
        return matches[-1] / "env"
    raise ConfigError(
        f"image {name!r} not found: expected 'default', 'none', a spec file (*.toml), an image "
        f"directory, or the name of an image built with `ridgeline image build` (cache: {cache_root()})"
    )
