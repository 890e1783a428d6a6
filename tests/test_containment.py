"""The sandbox is a security boundary: each containment promise of the threat model is a test."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ridgeline.sandbox import Sandbox
from ridgeline.sandbox.bwrap import BwrapSandbox


@pytest.fixture
def host_server() -> Iterator[int]:
    """A TCP server on the host's loopback that answers 'host' to anyone who connects."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.sendall(b"host")
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join()
    srv.close()


_CONNECT = (
    "python3 -c \"import socket,sys; s=socket.create_connection(('{host}', {port}), timeout=2); "
    'print(s.recv(10).decode())"'
)


def test_no_network_only_loopback(sb: Sandbox, host_server: int) -> None:
    ifaces = sb.exec("cat /proc/net/dev").stdout
    assert "lo:" in ifaces
    assert len([line for line in ifaces.splitlines() if ":" in line]) == 1
    r = sb.exec(_CONNECT.format(host="127.0.0.1", port=host_server), timeout=20)
    assert r.exit_code != 0 and "host" not in r.stdout  # the host's loopback is another namespace
    r = sb.exec(_CONNECT.format(host="1.1.1.1", port=53), timeout=20)
    assert r.exit_code != 0


def test_allow_internet_shares_the_host_network(sandbox_factory: object, host_server: int) -> None:
    sb = sandbox_factory(allow_internet=True)  # type: ignore[operator]
    r = sb.exec(_CONNECT.format(host="127.0.0.1", port=host_server), timeout=20)
    assert r.ok and r.stdout.strip() == "host"


def test_cannot_read_host_secrets_or_the_checkout(sb: Sandbox, tmp_path: Path) -> None:
    secret = Path("/root") / f".ridgeline-secret-{os.getpid()}"
    secret.write_text("TOP SECRET")
    try:
        r = sb.exec(f"cat {secret}; ls /root; ls /work; cat /etc/shadow; ls /home")
        assert "TOP SECRET" not in r.stdout
        assert r.exit_code != 0
        assert "main" not in r.stdout  # /work/main, the checkout
        # A symlink planted by the agent is resolved inside the sandbox, not on the host.
        sb.exec(f"ln -s {secret} /app/link")
        with pytest.raises(FileNotFoundError):
            sb.read_file("link")
    finally:
        secret.unlink()
    assert str(Path(__file__).resolve().parents[1]) not in sb.exec("cat /proc/self/mountinfo").stdout


def test_cannot_write_outside_the_workspace(sb: Sandbox) -> None:
    for target in ("/usr/bin/evil", "/etc/evil", "/evil", "/logs/verifier/reward.txt", "/opt/evil"):
        r = sb.exec(f"echo x > {target}")
        assert r.exit_code != 0, target
    assert sb.exec("echo ok > /app/f && echo ok > /tmp/f && echo ok > /root/f && echo 1 > /logs/agent/a").ok


def test_sandboxes_cannot_see_each_other(sandbox_factory: object) -> None:
    a = sandbox_factory()  # type: ignore[operator]
    b = sandbox_factory()  # type: ignore[operator]
    a.exec("echo mine > /tmp/a && echo mine > /app/a && sleep 1000 &")
    r = b.exec("cat /tmp/a /app/a; ps -eo args")
    assert "mine" not in r.stdout and "sleep 1000" not in r.stdout


def test_root_inside_is_unprivileged_outside(sb: Sandbox) -> None:
    r = sb.exec("cat /proc/self/uid_map; grep -E 'CapEff|CapBnd|NoNewPrivs' /proc/self/status; id -u")
    uid_map = r.stdout.splitlines()[0].split()
    assert uid_map[0] == "0" and uid_map[1] != "0" and uid_map[2] == "1"
    assert "CapEff:\t0000000000000000" in r.stdout
    assert "CapBnd:\t0000000000000000" in r.stdout
    assert "NoNewPrivs:\t1" in r.stdout
    assert r.stdout.strip().endswith("0")
    # Privileged operations fail even for "root".
    assert sb.exec("mount -t tmpfs none /tmp").exit_code != 0
    assert sb.exec("chown 0:0 /usr/bin/ls").exit_code != 0


def test_cannot_see_or_signal_host_processes(sb: Sandbox) -> None:
    me = os.getpid()
    r = sb.exec("ps -eo pid,args")
    assert "pytest" not in r.stdout
    assert sb.exec(f"kill -9 {me}").exit_code != 0
    os.kill(me, 0)  # still alive


def test_host_environment_does_not_leak(sb: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIDGELINE_HOST_SECRET", "leaked")
    r = sb.exec("env")
    assert "leaked" not in r.stdout and "RIDGELINE_HOST_SECRET" not in r.stdout
    assert "HOME=/root" in r.stdout


def test_memory_limit(sandbox_factory: object) -> None:
    sb = sandbox_factory(memory_mb=64)  # type: ignore[operator]
    r = sb.exec("python3 -c \"x = bytearray(300 * 1024 * 1024); print('allocated')\"", timeout=60)
    assert r.exit_code != 0 and "allocated" not in r.stdout
    assert sb.exec("echo alive").ok


def test_process_count_limit_stops_a_fork_bomb(sandbox_factory: object) -> None:
    sb = sandbox_factory(pids=40)  # type: ignore[operator]
    r = sb.exec(":(){ :|:& };:", timeout=3)  # the classic bomb
    assert r.exit_code != 0
    r = sb.exec("for i in $(seq 200); do sleep 30 & done", timeout=10)
    assert "fork" in r.stderr.lower() or "resource temporarily unavailable" in r.stderr.lower()
    assert isinstance(sb, BwrapSandbox) and sb._cg is not None
    assert 0 < len(sb._cg.pids()) <= 40
    sb.close()
    assert sb._cg.pids() == []


def test_disk_limit(sandbox_factory: object) -> None:
    sb = sandbox_factory(storage_mb=16)  # type: ignore[operator]
    r = sb.exec("dd if=/dev/zero of=/app/big bs=1M count=64", timeout=60)
    assert r.exit_code != 0 and "No space left" in r.stderr
    r = sb.exec("dd if=/dev/zero of=/tmp/big bs=1M count=64", timeout=60)
    assert r.exit_code != 0 and "No space left" in r.stderr


def test_timeout_kills_double_forked_and_setsid_processes(sb: Sandbox) -> None:
    sb.exec("sleep 2000 &")  # a background process from an earlier command must survive
    r = sb.exec(
        "setsid sleep 3001 & (sh -c 'sleep 3002 &' &); nohup sleep 3003 >/dev/null 2>&1 & sleep 3004",
        timeout=1,
    )
    assert r.timed_out and r.exit_code == 124
    ps = sb.exec("ps -eo args").stdout
    assert not any(f"sleep 300{i}" in ps for i in range(1, 5)), ps
    assert "sleep 2000" in ps


def test_signals_inside_do_not_escape(sb: Sandbox) -> None:
    # Killing every visible process only reaches the sandbox's own.
    sb.exec("kill -9 -1", timeout=10)
    assert sb.exec("echo recovered").stdout == "recovered\n"
