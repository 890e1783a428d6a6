"""The default local backend: bubblewrap + overlayfs + cgroups.

Threat model
------------
Covered — a command inside the sandbox, running as "root" there, cannot:

* use the network, unless the task sets ``allow_internet`` (new network namespace: loopback only);
* see or signal host processes or other sandboxes (new pid, ipc and uts namespaces);
* read host files outside the read-only system layers: ``/usr`` (and the ``/bin``, ``/lib`` links),
  a minimal ``/etc``, the environment image, and the task's own files. Home directories, ``/work``,
  the project checkout and other sandboxes' files are simply not mounted;
* write anywhere but its workspace (the workdir, an overlay on a size-capped tmpfs), ``/tmp``,
  ``$HOME`` and ``/logs/agent`` (the root is remounted read-only);
* gain privilege on the host: uid 0 inside maps to an unprivileged host uid (``RIDGELINE_SANDBOX_UID``,
  default 100000) through a user namespace; all capabilities are dropped, ``no_new_privs`` is set and
  the bounding set is empty, so set-uid binaries gain nothing;
* exhaust the host: memory (``memory_mb``, tmpfs pages included), process count (``pids``) and CPU
  (``cpus``) are cgroup limits; workspace and ``/tmp`` sizes are tmpfs limits (``storage_mb``);
* outlive its timeout or its sandbox: each ``exec`` runs in its own child cgroup, and a timeout kills
  that whole cgroup (double-forked and ``setsid``'d processes included); ``close`` kills the
  sandbox's cgroup; the holder process dies with its parent (``--die-with-parent``);
* see the host's environment variables (the environment is rebuilt from scratch).

Not covered:

* kernel exploits: the sandbox shares the host kernel, with no seccomp filter beyond bubblewrap's
  defaults — run untrusted *adversarial* code in VMs;
* side channels (timing, /proc/cpuinfo, load average), and the disk I/O bandwidth (no io limits);
* anything the task itself mounts in with ``binds``, or ``allow_internet = true``.

Mechanics
---------
``create`` mounts a tmpfs (the size cap) holding the overlay's upper layer, and mounts the overlay of
the task's files (a cached, read-only base layer) under it, with the mount(2) syscall. On the first
``exec`` a *holder* is started: ``bwrap`` running a shell that waits on a pipe, which keeps the
namespaces alive so that background processes survive between commands. Each ``exec`` enters those
namespaces with ``nsenter`` and drops every capability with ``setpriv`` before running the command.
``snapshot`` copies the upper layer; ``restore`` and ``fork`` mount an overlay whose lower layers are
that copy over the base, so a group of rollouts starts from one prepared state without copying it.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import Self

from ridgeline.errors import SandboxClosedError, SandboxError, SandboxUnavailableError
from ridgeline.sandbox import _mount
from ridgeline.sandbox.base import (
    TIMEOUT_EXIT_CODE,
    ExecResult,
    Sandbox,
    SandboxConfig,
    Snapshot,
    track,
)
from ridgeline.sandbox.cgroups import CgroupSet, detect_version
from ridgeline.sandbox.images import IMAGE_MOUNT, resolve_image

SANDBOX_UID = int(os.environ.get("RIDGELINE_SANDBOX_UID", "100000"))
#: Output beyond this many bytes per stream is cut in the middle (head and tail kept).
MAX_OUTPUT_BYTES = 8 * 1024 * 1024
_ETC_FROM_HOST = (
    "alternatives",
    "ssl",
    "ca-certificates",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "nsswitch.conf",
    "mime.types",
    "protocols",
    "services",
    "debian_version",
    "bash.bashrc",
    "inputrc",
    "localtime",
    "os-release",
    "magic",
    "magic.mime",
    "profile",
    "host.conf",
    "gai.conf",
)
#: How long bwrap may take to set a sandbox up before it counts as failed.
_START_TIMEOUT_S = 60.0
_PATH = f"{IMAGE_MOUNT}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def runtime_root() -> Path:
    return Path(os.environ.get("RIDGELINE_RUNTIME_DIR", "/run/ridgeline"))


_check_lock = threading.Lock()
_checked: dict[str, str] = {}


def check_available() -> None:
    """Raise :class:`SandboxUnavailableError` with the fix when this machine cannot run the backend."""
    with _check_lock:
        if "ok" in _checked:
            return
        if os.geteuid() != 0:
            raise SandboxUnavailableError(
                "the bwrap backend needs root (it mounts overlays and sets cgroup limits); run as root "
                'or use the container backend (type = "docker")'
            )
        for tool in ("bwrap", "nsenter", "setpriv"):
            if shutil.which(tool, path="/usr/bin:/bin:/usr/sbin:/sbin") is None:
                pkg = "bubblewrap" if tool == "bwrap" else "util-linux"
                raise SandboxUnavailableError(f"{tool} is not installed: apt-get install -y {pkg}")
        detect_version()
        _prepare_runtime()
        _checked["ok"] = "yes"


def _prepare_runtime() -> None:
    root = runtime_root()
    for sub in ("boxes", "layers", "snapshots"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o711)
    boxes = root / "boxes"
    # Box directories hold only mount points and small logs: keep their churn off the disk. The lock
    # keeps two processes starting at once from stacking two tmpfs mounts.
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.ismount(boxes):
            with contextlib.suppress(OSError):
                _mount.mount(
                    "tmpfs", str(boxes), "tmpfs", _mount.MS_NOSUID | _mount.MS_NODEV, "size=64m,mode=0711"
                )
    empty = root / "layers" / "empty"
    if not empty.exists():
        empty.mkdir(exist_ok=True)
        os.chown(empty, SANDBOX_UID, SANDBOX_UID)
    _set_child_subreaper()
    threading.Thread(target=sweep_stale_boxes, name="sandbox-sweep", daemon=True).start()


def _process_token(pid: int) -> str:
    """``pid:starttime`` — identifies a process across pid reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return f"{pid}:{stat.rsplit(')', 1)[1].split()[19]}"


_OWNER = _process_token(os.getpid())


def sweep_stale_boxes() -> int:
    """Tear down sandboxes whose owning process died without closing them (``kill -9``).

    Each box directory records its owner as ``pid:starttime``; boxes of dead owners have their
    processes killed, mounts detached, cgroups and directories removed, as are sandbox cgroups
    left without a box. Returns how many boxes were swept.
    """
    boxes = runtime_root() / "boxes"
    if not boxes.is_dir():
        return 0
    mountinfo = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    swept = 0
    version = detect_version()
    for box in list(boxes.iterdir()):
        try:
            try:
                owner = (box / "owner").read_text().strip()
            except FileNotFoundError:
                owner = ""
            if owner and _process_token(int(owner.split(":")[0])) == owner:
                continue  # alive
            if not owner and time.time() - box.stat().st_mtime < 60:
                continue  # being created right now (the owner file is written first thing)
            cg = CgroupSet(f"sb-{box.name}", version)
            cg.kill()
            mounts = sorted((m for m in mountinfo if m.startswith(f"{box}/")), key=len, reverse=True)
            for m in mounts:
                with contextlib.suppress(OSError):
                    _mount.umount(m)
            if not any(os.path.ismount(m) for m in mounts):
                shutil.rmtree(box, ignore_errors=True)
            cg.remove(background=False)
            swept += 1
        except (OSError, ValueError):
            continue  # another process is tearing it down
    # A live sandbox creates its box directory before its cgroup, so a cgroup whose box is gone (checked
    # right before acting, not from an earlier listing) belongs to no live sandbox.
    for group in CgroupSet("", version).paths[0].glob("sb-*"):
        with contextlib.suppress(OSError):
            if not (boxes / group.name[3:]).exists():
                cg = CgroupSet(group.name, version)
                cg.kill()
                cg.remove(background=False)
    return swept


def _set_child_subreaper() -> None:
    """Adopt orphans: bwrap's outer process may exit before reaping the sandbox's init, and the
    host's pid 1 is not always a reaper (containers). We reap those inits ourselves (see close)."""
    import ctypes

    pr_set_child_subreaper = 36
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def _sandbox_etc() -> Path:
    """A minimal /etc for sandboxes: our passwd/group/hosts plus the host files programs need, in one
    directory bound with a single mount (one bind per file costs ~0.1 ms each at every start)."""
    sig = []
    for name in _ETC_FROM_HOST:
        with contextlib.suppress(OSError):
            st = os.lstat(Path("/etc") / name)
            sig.append(f"{name}:{st.st_mtime_ns}:{st.st_size}")
    import hashlib

    digest = hashlib.sha256("|".join(sig).encode()).hexdigest()[:16]
    etc = runtime_root() / f"etc-{digest}"
    if etc.exists():
        return etc
    tmp = runtime_root() / f".etc-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    for name in _ETC_FROM_HOST:
        src = Path("/etc") / name
        if src.is_symlink() or src.exists():
            subprocess.run(["cp", "-a", str(src), str(tmp / name)], check=True)
    (tmp / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )
    (tmp / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    (tmp / "hosts").write_text("127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n")
    (tmp / "hostname").write_text("sandbox\n")
    (tmp / "resolv.conf").write_text("")  # replaced by the host's when the network is shared
    os.chmod(tmp, 0o755)
    try:
        os.rename(tmp, etc)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return etc


_layer_lock = threading.Lock()
_layer_cache: dict[tuple[str, tuple[tuple[str, int, int], ...]], Path] = {}


def _tree_signature(path: Path) -> tuple[tuple[str, int, int], ...]:
    sig = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames) + dirnames:
            st = os.lstat(os.path.join(dirpath, name))
            sig.append((os.path.relpath(os.path.join(dirpath, name), path), st.st_size, st.st_mtime_ns))
    return tuple(sig)


def base_layer(files_dir: Path | None) -> Path:
    """A cached, read-only copy of ``files_dir`` owned by the sandbox uid (an overlay lower layer)."""
    if files_dir is None or not files_dir.exists():
        return runtime_root() / "layers" / "empty"
    src = files_dir.resolve()
    key = (str(src), _tree_signature(src))
    with _layer_lock:
        hit = _layer_cache.get(key)
        if hit is not None and hit.exists():
            return hit
        import hashlib

        digest = hashlib.sha256(repr(key).encode()).hexdigest()[:20]
        dest = runtime_root() / "layers" / digest
        if not dest.exists():
            tmp = dest.with_name(f".{digest}.{uuid.uuid4().hex[:6]}")
            proc = subprocess.run(["cp", "-a", f"{src}/.", str(tmp)], capture_output=True, text=True)
            if proc.returncode != 0:
                # cp needs the target to exist for "src/." form
                tmp.mkdir(parents=True, exist_ok=True)
                proc = subprocess.run(["cp", "-a", f"{src}/.", str(tmp)], capture_output=True, text=True)
            if proc.returncode != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                raise SandboxError(f"could not copy task files from {src}: {proc.stderr.strip()}")
            subprocess.run(["chown", "-R", f"{SANDBOX_UID}:{SANDBOX_UID}", str(tmp)], check=True)
            os.chmod(tmp, 0o755)
            try:
                os.rename(tmp, dest)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
        _layer_cache[key] = dest
        return dest


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for d in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
        p = Path("/") / d
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), f"/{d}"]
        elif p.is_dir():
            args += ["--ro-bind", str(p), f"/{d}"]
    args += ["--ro-bind", str(_sandbox_etc()), "/etc"]
    return args


_SYSTEM_BINDS: list[str] | None = None
_counter = itertools.count()


class _Janitor:
    """Removes closed sandboxes' directories and cgroups off the hot path, in one daemon thread."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Path | None, CgroupSet | None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, item: tuple[Path | None, CgroupSet | None]) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="sandbox-janitor", daemon=True)
                self._thread.start()
        self._queue.put(item)

    def _run(self) -> None:
        while True:
            path, cg = self._queue.get()
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)
            if cg is not None:
                cg.remove(background=False)


_janitor = _Janitor()


def _reap(pid: int) -> None:
    """Reap the sandbox's init if it was orphaned to us (see _set_child_subreaper)."""
    for _ in range(200):
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return  # not ours: its parent reaped it
        if done:
            return
        time.sleep(0.0005)


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for f in (proc.stdin, proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            if f is not None:
                f.close()


def _read_memfd(fd: int) -> str:
    size = os.fstat(fd).st_size
    if size <= MAX_OUTPUT_BYTES:
        data = os.pread(fd, size, 0)
    else:
        half = MAX_OUTPUT_BYTES // 2
        data = (
            os.pread(fd, half, 0)
            + f"\n[... {size - 2 * half} bytes cut by the sandbox ...]\n".encode()
            + os.pread(fd, half, size - half)
        )
    return data.decode("utf-8", errors="replace")


class BwrapSandbox(Sandbox):
    """A bubblewrap sandbox. See the module docstring for the threat model and mechanics."""

    def __init__(self, config: SandboxConfig, layers: tuple[Path, ...], keep: list[Snapshot]) -> None:
        self.config = config
        self.id = uuid.uuid4().hex[:12]
        self._layers = layers
        self._keep = keep  # snapshots whose directories our overlay uses as lower layers
        self._dir = runtime_root() / "boxes" / self.id
        self._ws = self._dir / "ws"
        self._merged = self._dir / "merged"
        self._lock = threading.RLock()
        self._closed = False
        self._holder: subprocess.Popen[bytes] | None = None
        self._holder_pid = 0
        self._exec_ids = itertools.count()
        self._nsenter_used = False
        self._mounted: list[str] = []
        self._binds: list[str] = []
        self._cg: CgroupSet | None = None
        self._image = resolve_image(config.image)
        # What bwrap binds at /logs/agent and /logs/verifier: private directories, or the caller's
        # directories staged (bind-mounted) here so the unprivileged bwrap can reach them.
        self._agent_logs = self._dir / "logs-agent"
        self._verifier_logs = self._dir / "logs-verifier"

    # ----------------------------------------------------------------- lifecycle
    @classmethod
    def create(cls, config: SandboxConfig, *, snapshot: Snapshot | None = None) -> Self:
        check_available()
        if snapshot is not None:
            layers, keep = snapshot.layers, [snapshot]
        else:
            layers, keep = (base_layer(config.files_dir),), []
        sb = cls(config, layers, keep)
        try:
            sb._setup()
        except BaseException:
            sb.close()
            raise
        track(sb)
        return sb

    def _setup(self) -> None:
        self._dir.mkdir(parents=True)
        (self._dir / "owner").write_text(_OWNER)
        self._cg = CgroupSet.create(f"sb-{self.id}")
        self._cg.set_limits(memory_mb=self.config.memory_mb, pids=self.config.pids, cpus=self.config.cpus)
        for d in (self._ws, self._merged):
            d.mkdir()
        for d, src in (
            (self._agent_logs, self.config.agent_logs),
            (self._verifier_logs, self.config.verifier_logs),
        ):
            d.mkdir()
            if src is None:
                os.chown(d, SANDBOX_UID, SANDBOX_UID)
            else:
                self._stage(src, d, "/logs")
        self._mount_workspace()
        for i, b in enumerate(self.config.binds):
            dest = self._dir / "binds" / str(i)
            dest.parent.mkdir(exist_ok=True)
            if Path(b.source).is_dir():
                dest.mkdir()
            elif Path(b.source).exists():
                dest.touch()
            self._stage(Path(b.source), dest, b.target)

    def _stage(self, src: Path, dest: Path, target: str) -> None:
        """Bind ``src`` onto ``dest`` in the box directory: bwrap runs as the unprivileged sandbox uid,
        which may not be able to traverse the source's parents (a 0700 temporary directory, /root)."""
        if not src.exists():
            raise SandboxError(f"bind source {src} (for {target}) does not exist")
        try:
            _mount.mount(str(src), str(dest), "", _mount.MS_BIND | _mount.MS_REC)
        except OSError as exc:
            raise SandboxError(f"could not stage {src} for {target}: {exc}") from exc
        self._binds.append(str(dest))

    def _mount_workspace(self) -> None:
        try:
            _mount.mount(
                "tmpfs",
                str(self._ws),
                "tmpfs",
                _mount.MS_NOSUID | _mount.MS_NODEV,
                f"size={self.config.storage_mb}m,mode=0755",
            )
            self._mounted.append(str(self._ws))
            upper, work = self._ws / "upper", self._ws / "work"
            upper.mkdir()
            work.mkdir()
            os.chown(upper, SANDBOX_UID, SANDBOX_UID)
            lower = ":".join(str(p) for p in self._layers)
            _mount.mount(
                "overlay",
                str(self._merged),
                "overlay",
                _mount.MS_NOSUID | _mount.MS_NODEV,
                f"lowerdir={lower},upperdir={upper},workdir={work}",
            )
            self._mounted.append(str(self._merged))
        except OSError as exc:
            raise SandboxError(f"could not mount the sandbox workspace: {exc}") from exc

    def _unmount_workspace(self) -> None:
        while self._mounted:
            target = self._mounted.pop()
            with contextlib.suppress(OSError):
                _mount.umount(target)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # Shield teardown from Ctrl-C: a second KeyboardInterrupt must not leak mounts or processes.
        old = None
        if threading.current_thread() is threading.main_thread():
            with contextlib.suppress(ValueError):
                old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self._stop_processes()
            self._unmount_workspace()
            for target in self._binds:
                with contextlib.suppress(OSError):
                    _mount.umount(target)
            # Never delete through a staged bind (it is the caller's data): only remove the box
            # directory when nothing is mounted below it any more. Removing directories and cgroups
            # is left to a background janitor: nothing can run in them any more.
            mounted = any(os.path.ismount(m) for m in [*self._binds, str(self._ws), str(self._merged)])
            _janitor.put((None if mounted else self._dir, self._cg))
        finally:
            if old is not None:
                signal.signal(signal.SIGINT, old)

    def _stop_processes(self, *, kill_first: bool = False) -> None:
        """End every process of the sandbox.

        SIGKILL to bwrap's init (pid 1 of the sandbox) makes the kernel kill everything in the pid
        namespace at once; the outer bwrap then exits. The cgroup sweep catches the rest (the
        host-side ``nsenter`` parents) and anything that somehow left the namespace.
        """
        if kill_first and self._cg is not None:
            self._cg.kill()
        if self._holder is not None:
            if self._holder_pid and self._holder.poll() is None:
                # The outer bwrap is alive, so its child init cannot have been reaped: no pid reuse.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._holder_pid, signal.SIGKILL)
            _close_pipes(self._holder)
            try:
                self._holder.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._holder.kill()
                self._holder.wait()
            _reap(self._holder_pid)
            self._holder = None
            self._holder_pid = 0
        # Commands entered with nsenter leave host-side parents (and any process that escaped the
        # namespace) in their cgroups; a sandbox that only ran its first command has none.
        if self._cg is not None and (self._nsenter_used or kill_first):
            self._cg.kill()
            self._nsenter_used = False

    # ----------------------------------------------------------------- holder
    def _bwrap_args(self) -> list[str]:
        global _SYSTEM_BINDS
        if _SYSTEM_BINDS is None:
            _SYSTEM_BINDS = _system_binds()
        c = self.config
        size = str(c.storage_mb * 1024 * 1024)
        args = ["/usr/bin/bwrap", "--unshare-all"]
        args += ["--die-with-parent", "--new-session", "--uid", "0", "--gid", "0", "--hostname", "sandbox"]
        args += _SYSTEM_BINDS
        if c.allow_internet:
            args += ["--share-net", "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"]
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/root"]
        args += ["--size", str(16 * 1024 * 1024), "--tmpfs", "/run"]
        args += ["--bind", str(self._merged), c.workdir]
        args += ["--bind", str(self._agent_logs), "/logs/agent"]
        args += [
            "--bind" if c.verifier_logs_writable else "--ro-bind",
            str(self._verifier_logs),
            "/logs/verifier",
        ]
        if self._image is not None:
            args += ["--ro-bind", str(self._image), IMAGE_MOUNT]
        for i, b in enumerate(c.binds):
            args += ["--bind" if b.writable else "--ro-bind", str(self._dir / "binds" / str(i)), b.target]
        args += ["--remount-ro", "/", "--chdir", c.workdir, "--cap-drop", "ALL", "--clearenv"]
        return args

    def _start_holder(
        self,
        first: list[str] | None = None,
        env: dict[str, str] | None = None,
        fds: tuple[int, int, int] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start the holder; when ``first`` is given, it also runs that command as its first job.

        The holder is ``bwrap`` (as the unprivileged sandbox uid, mapped to root inside) running a
        shell that prints ``ready``, optionally runs the first command with stdin/stdout/stderr on fds
        3/4/5 and prints ``rc N``, then waits on its stdin: closing that pipe ends the sandbox. Riding
        the first command on the holder saves a whole ``nsenter`` round for the common
        create-exec-close cycle; its timeout kills the sandbox's processes, all of which it started.
        """
        assert self._cg is not None
        r, w = os.pipe()
        # dash only names fds 0-9 in redirections, so the first command's stdio (inherited under the
        # caller's fd numbers) is reopened through /proc/self/fd.
        script = "echo ready; read _"
        if fds is not None:
            i, o, e = fds
            script = (
                f'echo ready; "$@" </proc/self/fd/{i} >>/proc/self/fd/{o} 2>>/proc/self/fd/{e}; '
                'echo "rc $?"; read _'
            )
        setenv: list[str] = []
        for k, v in (env or {}).items():
            setenv += ["--setenv", k, v]
        # setpriv drops to the sandbox uid (mapped to root inside by bwrap). Changing uid with
        # Popen(user=...) would force a fork() of this whole process instead of a vfork().
        argv = [
            "/usr/bin/setpriv",
            f"--reuid={SANDBOX_UID}",
            f"--regid={SANDBOX_UID}",
            "--clear-groups",
            *self._bwrap_args(),
            *setenv,
            "--info-fd",
            str(w),
            "/bin/sh",
            "-c",
            script,
            "rl-holder",
            *(first or []),
        ]
        pass_fds = [w, *fds] if fds is not None else [w]
        try:
            holder = self._cg.popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=pass_fds,
                bufsize=0,  # unbuffered: "ready" and "rc N" are read line by line, with select()
                env={"PATH": "/usr/bin:/bin"},
            )
        except OSError as exc:
            os.close(r)
            os.close(w)
            raise SandboxError(f"could not start bwrap: {exc}") from exc
        os.close(w)
        with os.fdopen(r, "rb") as info:
            # bwrap writes its info early; never block forever on a bwrap that hangs in setup.
            raw = info.read(4096) if select.select([info], [], [], _START_TIMEOUT_S)[0] else b""
        assert holder.stdout is not None and holder.stderr is not None
        ready = raw and select.select([holder.stdout], [], [], _START_TIMEOUT_S)[0]
        line = holder.stdout.readline() if ready else b""
        if not raw or line.strip() != b"ready":
            holder.kill()
            err = holder.stderr.read().decode(errors="replace").strip()
            holder.wait()
            _close_pipes(holder)
            raise SandboxError(f"bwrap failed to start the sandbox: {err or 'no output'}")
        try:
            self._holder_pid = int(json.loads(raw.decode().split("}")[0] + "}")["child-pid"])
        except (ValueError, KeyError) as exc:
            holder.kill()
            holder.wait()
            _close_pipes(holder)
            raise SandboxError(f"bwrap reported no child pid: {raw!r}") from exc
        self._holder = holder
        return holder

    def _holder_alive(self) -> bool:
        return self._holder is not None and self._holder.poll() is None

    def _env(self, extra: dict[str, str] | None) -> dict[str, str]:
        env = {
            "PATH": _PATH,
            "HOME": "/root",
            "USER": "root",
            "LOGNAME": "root",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "PYTHONUNBUFFERED": "1",
            "HOSTNAME": "sandbox",
        }
        env.update(self.config.env)
        if extra:
            env.update(extra)
        return env

    # ----------------------------------------------------------------- exec
    def exec(
        self,
        command: str | list[str],
        *,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        out_fd = os.memfd_create("rl-out")
        err_fd = os.memfd_create("rl-err")
        try:
            code, timed_out, duration, group = self._run(command, timeout, env, cwd, stdin, out_fd, err_fd)
            stdout, stderr = _read_memfd(out_fd), _read_memfd(err_fd)
        finally:
            os.close(out_fd)
            os.close(err_fd)
        if code in (1, 126, 127) and stderr.startswith(("nsenter:", "setpriv:")) and not self._holder_alive():
            raise SandboxError(f"sandbox {self.id} lost its namespaces: {stderr.strip()}")
        if code == 137 and group.oom_killed():
            stderr += f"\n[ridgeline: killed: out of memory (limit {self.config.memory_mb} MB)]\n"
        if timed_out:
            stderr += f"\n[ridgeline: timed out after {timeout:g} s; every process it started was killed]\n"
        return ExecResult(
            exit_code=code, stdout=stdout, stderr=stderr, duration_s=duration, timed_out=timed_out
        )

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
        """Run ``command`` with its output going straight to ``stdout_fd`` / ``stderr_fd`` (streaming).

        Returns ``(exit_code, timed_out)``; the exit code is 124 on timeout.
        """
        code, timed_out, _, _ = self._run(command, timeout, env, cwd, None, stdout_fd, stderr_fd, ride=False)
        return code, timed_out

    def _run(
        self,
        command: str | list[str],
        timeout: float | None,
        env: dict[str, str] | None,
        cwd: str | None,
        stdin: str | bytes | None,
        out_fd: int,
        err_fd: int,
        *,
        ride: bool = True,
    ) -> tuple[int, bool, float, CgroupSet]:
        """Run a command. ``ride``: a first command may ride on the holder's start; that reopens its
        stdio through /proc/self/fd inside, which works for our memfds but not for the caller's pipes
        or terminals (owned by host root, mode 0600), so attached runs go through nsenter."""
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        if cwd and cwd != self.config.workdir:
            # nsenter's -w would resolve a path on the host: change directory inside instead.
            wd = cwd if cwd.startswith("/") else f"{self.config.workdir}/{cwd}"
            argv = ["/bin/sh", "-c", 'cd -- "$0" && exec "$@"', wd, *argv]
        in_fd = os.memfd_create("rl-in") if stdin is not None else os.open(os.devnull, os.O_RDONLY)
        try:
            if stdin is not None:
                os.write(in_fd, stdin.encode() if isinstance(stdin, str) else stdin)
                os.lseek(in_fd, 0, os.SEEK_SET)
            with self._lock:
                if self._closed:
                    raise SandboxClosedError(f"sandbox {self.id} is closed")
                assert self._cg is not None
                if not self._holder_alive():
                    if self._holder is not None:
                        self._stop_processes()  # the holder died and took its namespaces with it
                    if ride:
                        return self._run_first(argv, timeout, env, (in_fd, out_fd, err_fd))
                    self._start_holder()
                group = self._cg.child(f"x{next(self._exec_ids)}")
                holder_pid = self._holder_pid
                self._nsenter_used = True
            full = [
                "/usr/bin/nsenter",
                "-t",
                str(holder_pid),
                "-U",
                "-m",
                "-p",
                "-n",
                "-i",
                "-u",
                "-r",
                "-w",
                "--",
                "/usr/bin/setpriv",
                "--bounding-set",
                "-all",
                "--inh-caps",
                "-all",
                "--no-new-privs",
                "--",
                *argv,
            ]
            start = time.perf_counter()
            try:
                proc = group.popen(full, stdin=in_fd, stdout=out_fd, stderr=err_fd, env=self._env(env))
            except OSError as exc:
                raise SandboxError(f"could not start a command in sandbox {self.id}: {exc}") from exc
            timed_out = False
            try:
                code = proc.wait(timeout=timeout)
            except (subprocess.TimeoutExpired, KeyboardInterrupt) as exc:
                group.kill()
                proc.wait()
                if isinstance(exc, KeyboardInterrupt):
                    raise
                timed_out = True
                code = TIMEOUT_EXIT_CODE
            duration = time.perf_counter() - start
        finally:
            os.close(in_fd)
        if code < 0:
            code = 128 - code
        return code, timed_out, duration, group

    def _run_first(
        self, argv: list[str], timeout: float | None, env: dict[str, str] | None, fds: tuple[int, int, int]
    ) -> tuple[int, bool, float, CgroupSet]:
        """Run the first command of a (re)started sandbox on the holder itself (lock held)."""
        assert self._cg is not None
        start = time.perf_counter()
        holder = self._start_holder(argv, self._env(env), fds)
        assert holder.stdout is not None
        timed_out = False
        line = b""
        ready = select.select([holder.stdout], [], [], timeout)[0] if timeout is not None else [holder.stdout]
        if ready:
            line = holder.stdout.readline()
        if not ready or not line.startswith(b"rc "):
            if not ready:
                timed_out = True
            self._stop_processes(kill_first=True)
        duration = time.perf_counter() - start
        if timed_out:
            code = TIMEOUT_EXIT_CODE
        elif line.startswith(b"rc "):
            code = int(line.split()[1])
        else:
            # The command killed the sandbox's own shell (e.g. `kill -9 -1`): its processes are gone.
            code = 128 + signal.SIGKILL
            os.write(
                fds[2], b"\n[ridgeline: the command ended the sandbox's processes; they were restarted]\n"
            )
        return code, timed_out, duration, self._cg

    # ----------------------------------------------------------------- files
    def _abspath(self, path: str) -> str:
        return path if path.startswith("/") else f"{self.config.workdir}/{path}"

    def read_file(self, path: str) -> bytes:
        p = self._abspath(path)
        r = self.exec(
            [
                "/bin/sh",
                "-c",
                'test -f "$1" || { test -e "$1" && exit 3 || exit 2; }; cat -- "$1"',
                "rl-read",
                p,
            ],
            timeout=60,
        )
        if r.exit_code == 2:
            raise FileNotFoundError(f"{p}: no such file in the sandbox")
        if r.exit_code == 3:
            raise IsADirectoryError(f"{p}: is not a regular file")
        if r.exit_code != 0:
            raise SandboxError(f"could not read {p}: {r.stderr.strip()}")
        return r.stdout.encode("utf-8", errors="surrogateescape")

    def write_file(self, path: str, data: str | bytes, mode: int = 0o644) -> None:
        p = self._abspath(path)
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod "$2" -- "$1"'
        r = self.exec(["/bin/sh", "-c", script, "rl-write", p, f"{mode:o}"], stdin=data, timeout=60)
        if r.exit_code != 0:
            if "Read-only" in r.stderr or "Permission denied" in r.stderr:
                raise PermissionError(f"{p}: not writable in the sandbox ({r.stderr.strip()})")
            raise SandboxError(f"could not write {p}: {r.stderr.strip()}")

    # ----------------------------------------------------------------- snapshots
    def snapshot(self) -> Snapshot:
        with self._lock:
            if self._closed:
                raise SandboxClosedError(f"sandbox {self.id} is closed")
            snap_id = uuid.uuid4().hex[:12]
            dest = runtime_root() / "snapshots" / snap_id
            dest.mkdir()
            proc = subprocess.run(
                ["cp", "-a", f"{self._ws / 'upper'}/.", str(dest)], capture_output=True, text=True
            )
            if proc.returncode != 0:
                shutil.rmtree(dest, ignore_errors=True)
                raise SandboxError(f"snapshot of sandbox {self.id} failed: {proc.stderr.strip()}")
            os.chown(dest, SANDBOX_UID, SANDBOX_UID)
            snap = Snapshot(id=snap_id, layers=(dest, *self._layers), config=self.config)
            # The copy lives as long as the snapshot object, or sandboxes built on it, are referenced.
            weakref.finalize(snap, shutil.rmtree, str(dest), True)
            snap._owners.extend(self._keep)
            return snap

    def restore(self, snapshot: Snapshot) -> None:
        with self._lock:
            if self._closed:
                raise SandboxClosedError(f"sandbox {self.id} is closed")
            self._stop_processes()
            self._unmount_workspace()
            self._layers, self._keep = snapshot.layers, [snapshot]
            self._mount_workspace()


__all__ = ["BwrapSandbox", "check_available", "runtime_root"]
