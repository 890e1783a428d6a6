"""How long ``ridgeline check`` takes on the ``starter`` suite (a script, not a timed test).

Builds the suite (``--n`` tasks, default 60, seed 1) in a temporary folder and checks it with the
default options (5 oracle runs, every probe, concurrency 8). ``--cores N`` pins this process, and so
every sandbox it starts, to N CPUs (``sched_setaffinity`` is inherited), to measure "on N cores" on a
bigger machine. Other load on the machine slows the run down: the load average before and after is
printed beside the figures. Prints the wall time, the CPU time of this process and its children, the
trials run, the verdicts, and the slowest tasks; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from collections import Counter
from pathlib import Path

from ridgeline.qa import CheckOptions, check_tasks
from ridgeline.tasks.suites import build_suite


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="starter")
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--oracle-runs", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--cores", type=int, default=None, help="pin to this many CPUs (default: all)")
    ap.add_argument("--no-screen", action="store_true", help="run every hack probe on its own")
    args = ap.parse_args()

    if args.cores is not None:
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[: args.cores]))
    cores = len(os.sched_getaffinity(0))
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        paths = build_suite(args.suite, args.n, args.seed, Path(tmp) / "tasks")
        trials = Counter[str]()

        def count(done: int, total: int, report: object) -> None:
            trials["total"] = total

        options = CheckOptions(
            oracle_runs=args.oracle_runs, concurrency=args.concurrency, screen=not args.no_screen
        )
        cpu0, t0 = _cpu_s(), time.perf_counter()
        reports = check_tasks(paths, options, on_progress=count)
        wall, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
    verdicts = Counter(r.verdict for r in reports)
    print(f"suite        {args.suite} n={len(paths)} seed={args.seed} on {cores} cores")
    print(f"wall         {wall:.1f} s  ({wall / 60:.2f} min)")
    print(f"cpu          {cpu:.1f} s  (this process and its sandboxes)")
    print(f"jobs         {trials['total']}  ({trials['total'] / max(1, len(paths)):.1f} per task)")
    print(f"verdicts     {dict(verdicts)}")
    print(f"load avg     {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    for r in sorted(reports, key=lambda r: -r.trial_s)[:5]:
        print(f"  slowest    {r.task}: {r.trial_s:.1f} s of trials")
    for r in reports:
        for p in r.problems:
            print(f"  {r.verdict:<10} {r.task}: {p}")
    print(
        json.dumps(
            {
                "suite": args.suite,
                "n": len(paths),
                "cores": cores,
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "jobs": trials["total"],
                "verdicts": dict(verdicts),
                "screen": not args.no_screen,
                "load_before": round(load_before, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
