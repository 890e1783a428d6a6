"""Harness overhead per trial, and a concurrency soak (a script, not a timed test).

Runs oracle trials on scaffolded tasks whose reference solution is one tiny command, and reports:
  overhead   per-trial wall time minus the time inside task commands (the agent's tool calls and the
             verifier's test command) and model calls — i.e. what Ridgeline itself costs: sandboxes,
             snapshots, the agent loop, files, bookkeeping. Target: median <= 50 ms.
  soak       N oracle trials at concurrency C (default 200 at 16): wall time, trials/s, infra failures.
The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from ridgeline.eval.runner import run_eval
from ridgeline.eval.trial import run_trial
from ridgeline.policies import parse_policy_spec
from ridgeline.tasks import load_task
from ridgeline.tasks.scaffold import scaffold_task


def overhead(rec: dict[str, object]) -> float:
    t = rec["timings"]
    assert isinstance(t, dict)
    inside = t.get("tool_s", 0.0) + t.get("model_s", 0.0) + t.get("verifier_command_s", 0.0)
    wall = rec["wall_s"]
    assert isinstance(wall, float)
    return wall - inside


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=50, help="sequential trials for the overhead figure")
    ap.add_argument("--soak", type=int, default=200, help="trials in the concurrency soak")
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    oracle = parse_policy_spec("oracle")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        task = load_task(scaffold_task("bench", root / "tasks"))
        run_trial(task, oracle, root / "warm")
        recs = [run_trial(task, oracle, root / "seq" / str(i)) for i in range(args.trials)]
        ovh = sorted(overhead(r) * 1000 for r in recs)
        walls = sorted(float(r["wall_s"]) * 1000 for r in recs)  # type: ignore[arg-type]
        print(f"sequential oracle trials: {len(recs)}")
        p95 = walls[int(0.95 * len(walls))]
        print(f"  wall      p50 {statistics.median(walls):7.1f} ms   p95 {p95:7.1f} ms")
        print(f"  overhead  p50 {statistics.median(ovh):7.1f} ms   p95 {ovh[int(0.95 * len(ovh))]:7.1f} ms")

        tasks = [load_task(scaffold_task(f"s{i}", root / "soak-tasks")) for i in range(args.soak // 4)]
        t = time.perf_counter()
        data = run_eval(tasks, oracle, root / "soak", k=4, concurrency=args.concurrency)
        soak_s = time.perf_counter() - t
        s = data["summary"]
        print(
            f"soak: {s['n_trials']} trials at concurrency {args.concurrency}: {soak_s:.1f} s "
            f"({s['n_trials'] / soak_s:.1f} trials/s), pass rate {s['pass_rate']}, "
            f"infra failures {s['n_infra_fail']}"
        )
        print(
            json.dumps(
                {
                    "overhead_p50_ms": round(statistics.median(ovh), 1),
                    "overhead_p95_ms": round(ovh[int(0.95 * len(ovh))], 1),
                    "trial_wall_p50_ms": round(statistics.median(walls), 1),
                    "soak_trials": s["n_trials"],
                    "soak_concurrency": args.concurrency,
                    "soak_s": round(soak_s, 1),
                    "soak_infra_fail": s["n_infra_fail"],
                    "soak_pass_rate": s["pass_rate"],
                }
            )
        )


if __name__ == "__main__":
    main()
