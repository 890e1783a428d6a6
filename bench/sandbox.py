"""Sandbox cost, measured side by side in one run (a script, not a timed test).

Measures, each over ``--iterations`` runs (default 200):
  floor    a bare ``bwrap --unshare-all ... true`` (the floor any bwrap sandbox pays);
  cycle    ridgeline's create + exec("true") + close;
  exec     exec("true") in a warm sandbox;
  fork     fork from a snapshot (+ exec "true" + close of the child);
  conc64   64 sandboxes at once, each running a Python one-liner (wall time per batch; errors counted).
Prints p50/p95 per measure and the ratio to the floor; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ridgeline.sandbox import SandboxConfig, create

BARE = [
    "bwrap",
    "--unshare-all",
    "--die-with-parent",
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/bin",
    "/bin",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--cap-drop",
    "ALL",
    "--clearenv",
    "true",
]


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--image", default="none", help="image to mount ('none' = system layers only)")
    args = ap.parse_args()
    n = args.iterations
    cfg = SandboxConfig(image=args.image)

    def bare() -> None:
        subprocess.run(BARE, check=True)

    def cycle() -> None:
        sb = create(cfg)
        assert sb.exec("true").exit_code == 0
        sb.close()

    warm = create(cfg)
    warm.exec("echo seed > /app/state")
    snap = warm.snapshot()

    def exec_true() -> None:
        warm.exec("true")

    def fork() -> None:
        child = warm.fork(snap)
        assert child.exec("true").exit_code == 0
        child.close()

    bare()
    cycle()  # warm caches (layers, image resolution)
    results: dict[str, list[float]] = {"floor": [], "cycle": [], "exec": [], "fork": []}
    # Interleave in rounds so that machine noise hits every measure alike.
    rounds = 10
    for _ in range(rounds):
        results["floor"] += timed(bare, n // rounds)
        results["cycle"] += timed(cycle, n // rounds)
        results["exec"] += timed(exec_true, n // rounds)
        results["fork"] += timed(fork, n // rounds)

    errors = 0

    def one(_: int) -> bool:
        with create(cfg) as sb:
            return sb.exec("python3 -c 'print(sum(range(1000)))'", timeout=120).stdout.strip() == "499500"

    conc: list[float] = []
    batches = max(1, n // 64)
    with ThreadPoolExecutor(64) as pool:
        for _ in range(batches):
            t = time.perf_counter()
            ok = list(pool.map(one, range(64)))
            conc.append((time.perf_counter() - t) * 1000)
            errors += ok.count(False)
    warm.close()

    floor50 = statistics.median(results["floor"])
    summary: dict[str, object] = {"iterations": n}
    print(f"{'measure':<8} {'p50 ms':>8} {'p95 ms':>8} {'x floor':>8}")
    for name, xs in results.items():
        p50, p95 = statistics.median(xs), pct(xs, 0.95)
        print(f"{name:<8} {p50:8.2f} {p95:8.2f} {p50 / floor50:8.2f}")
        summary[name] = {
            "p50_ms": round(p50, 2),
            "p95_ms": round(p95, 2),
            "ratio_to_floor": round(p50 / floor50, 2),
        }
    c50 = statistics.median(conc)
    print(f"conc64   {c50:8.1f} ms per batch of 64 ({batches} batches, {errors} errors)")
    summary["conc64"] = {"batch_p50_ms": round(c50, 1), "batches": batches, "errors": errors}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
