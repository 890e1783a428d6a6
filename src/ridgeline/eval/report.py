"""One self-contained HTML report for an evaluation run.

:func:`write_report` reads ``RUN_DIR/results.json`` and every trial's trajectory and writes
``RUN_DIR/report.html``: a single file with inline CSS, a few lines of inline JavaScript (expand,
collapse and filter) and charts drawn here as inline SVG, so it opens offline and can be attached to an
issue. Figures are recomputed from the trial records with :func:`ridgeline.eval.metrics.summarize`, so
the report never disagrees with the trials it shows.

Every string that comes from the run (task names, domains, model output, tool observations) is
HTML-escaped; trajectories are rendered defensively: any JSON is shown pretty-printed, a missing or
unreadable trajectory file is shown as such, and very long fields are cut at :data:`MAX_FIELD_CHARS`.
"""

from __future__ import annotations

import html
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ridgeline.errors import UserError
from ridgeline.eval.metrics import (
    INFRA_FAIL,
    is_scored,
    load_results,
    success_by_required_steps,
    summarize,
    task_key,
)

MAX_FIELD_CHARS = 20_000
"""Longest text shown for one field of one step; the rest is replaced by a count of what was cut."""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def _ci(ci: Sequence[float] | None, pct: bool = True) -> str:
    if not ci:
        return ""
    lo, hi = ci
    return f"[{_pct(lo)}, {_pct(hi)}]" if pct else f"[{lo:.3f}, {hi:.3f}]"


def _num(v: float | None, digits: int = 2) -> str:
    if v is None:
        return "—"
    return f"{v:,.{digits}f}" if isinstance(v, float) and not v.is_integer() else f"{int(v):,}"


# -- inline SVG charts --------------------------------------------------------------------------------


def _rate_chart(title: str, rows: Sequence[tuple[str, float | None, Sequence[float] | None, int]]) -> str:
    """Vertical bars of pass rates (0..1) with their 95% intervals as error bars."""
    if not rows:
        return f'<figure><figcaption>{_e(title)}</figcaption><p class="muted">no data</p></figure>'
    slot, top, left, plot_h, bottom = 64, 16, 40, 160, 56
    width = left + slot * len(rows) + 16
    height = top + plot_h + bottom
    parts = [f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top + plot_h * (1 - tick)
        parts.append(f'<line class="grid" x1="{left}" x2="{width - 8}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(
            f'<text class="tick" x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{int(tick * 100)}%</text>'
        )
    for i, (label, rate, ci, n) in enumerate(rows):
        x = left + i * slot + slot / 2
        if rate is not None:
            h = plot_h * rate
            parts.append(
                f'<rect class="bar" x="{x - 18:.1f}" y="{top + plot_h - h:.1f}" width="36" height="{h:.1f}">'
                f"<title>{_e(label)}: {_pct(rate)} {_ci(ci)} n={n}</title></rect>"
            )
        if ci and n:
            y_lo, y_hi = top + plot_h * (1 - ci[0]), top + plot_h * (1 - ci[1])
            parts.append(
                f'<path class="err" d="M{x:.1f},{y_lo:.1f}V{y_hi:.1f}M{x - 6:.1f},{y_lo:.1f}h12'
                f'M{x - 6:.1f},{y_hi:.1f}h12"/>'
            )
        short = label if len(label) <= 10 else label[:9] + "…"
        parts.append(
            f'<text class="lbl" x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{_e(short)}</text>'
        )
        parts.append(
            f'<text class="tick" x="{x:.1f}" y="{top + plot_h + 30}" text-anchor="middle">n={n}</text>'
        )
    parts.append("</svg>")
    return f"<figure><figcaption>{_e(title)}</figcaption>{''.join(parts)}</figure>"


def _bins(values: Sequence[float], max_bins: int = 20) -> list[tuple[float, float, int]]:
    """Equal-width bins ``[lo, hi)``; integer data gets integer-aligned bins."""
    lo, hi = min(values), max(values)
    integral = all(float(v).is_integer() for v in values)
    if integral:
        width = float(max(1, math.ceil((hi - lo + 1) / max_bins)))
        count = int((hi - lo) // width) + 1
    else:
        count = max_bins if hi > lo else 1
        width = (hi - lo) / count if hi > lo else 1.0
    counts = [0] * count
    for v in values:
        counts[min(count - 1, int((v - lo) // width))] += 1
    return [(lo + i * width, lo + (i + 1) * width, c) for i, c in enumerate(counts)]


def _histogram(title: str, values: Sequence[float], unit: str) -> str:
    if not values:
        return f'<figure><figcaption>{_e(title)}</figcaption><p class="muted">no data</p></figure>'
    bins = _bins(values)
    peak = max(c for _, _, c in bins)
    top, left, plot_h, plot_w, bottom = 16, 40, 140, 360, 40
    width, height = left + plot_w + 16, top + plot_h + bottom
    bw = plot_w / len(bins)
    parts = [f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">']
    parts.append(f'<text class="tick" x="{left - 4}" y="{top + 4}" text-anchor="end">{peak}</text>')
    parts.append(f'<text class="tick" x="{left - 4}" y="{top + plot_h + 4}" text-anchor="end">0</text>')
    for i, (b_lo, b_hi, c) in enumerate(bins):
        h = plot_h * c / peak
        parts.append(
            f'<rect class="bar" x="{left + i * bw + 1:.1f}" y="{top + plot_h - h:.1f}" '
            f'width="{max(bw - 2, 1):.1f}" height="{h:.1f}">'
            f"<title>{_num(b_lo)}–{_num(b_hi)} {_e(unit)}: {c}</title></rect>"
        )
    y = top + plot_h + 16
    parts.append(f'<text class="tick" x="{left}" y="{y}">{_num(bins[0][0])}</text>')
    parts.append(
        f'<text class="tick" x="{left + plot_w}" y="{y}" text-anchor="end">{_num(bins[-1][1])}</text>'
    )
    parts.append(
        f'<text class="lbl" x="{left + plot_w / 2}" y="{y + 14}" text-anchor="middle">{_e(unit)}</text>'
    )
    parts.append("</svg>")
    return f"<figure><figcaption>{_e(title)}</figcaption>{''.join(parts)}</figure>"


def _status_chart(counts: Mapping[str, int]) -> str:
    if not counts:
        return '<p class="muted">no trials</p>'
    total = sum(counts.values())
    row_h, left, plot_w = 22, 140, 300
    height = row_h * len(counts) + 8
    parts = [
        f'<svg viewBox="0 0 {left + plot_w + 80} {height}" width="{left + plot_w + 80}" height="{height}">'
    ]
    for i, (status, n) in enumerate(counts.items()):
        y = 4 + i * row_h
        cls = "ok" if status == "ok" else ("infra" if status == INFRA_FAIL else "fail")
        w = plot_w * n / total
        parts.append(f'<text class="lbl" x="{left - 6}" y="{y + 14}" text-anchor="end">{_e(status)}</text>')
        parts.append(f'<rect class="{cls}" x="{left}" y="{y}" width="{w:.1f}" height="{row_h - 6}"/>')
        parts.append(f'<text class="tick" x="{left + w + 4:.1f}" y="{y + 14}">{n} ({_pct(n / total)})</text>')
    parts.append("</svg>")
    return "".join(parts)


# -- trajectories -------------------------------------------------------------------------------------


def _cut(text: str) -> str:
    if len(text) <= MAX_FIELD_CHARS:
        return text
    return text[:MAX_FIELD_CHARS] + f"\n… ({len(text) - MAX_FIELD_CHARS:,} more characters not shown)"


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        return _cut(value)
    return _cut(json.dumps(value, indent=2, ensure_ascii=False, default=repr))


def _preview(step: Mapping[str, Any]) -> str:
    for key in ("content", "observation", "text", "error"):
        value = step.get(key)
        if isinstance(value, str) and value.strip():
            flat = " ".join(value.split())
            return flat if len(flat) <= 100 else flat[:99] + "…"
    calls = step.get("tool_calls")
    if isinstance(calls, list) and calls:
        names = []
        for c in calls:
            fn = c.get("function") if isinstance(c, dict) else None
            nm = (fn.get("name") if isinstance(fn, dict) else None) or (
                c.get("name") if isinstance(c, dict) else None
            )
            names.append(str(nm or "?"))
        return "calls " + ", ".join(names)
    return ""


def _render_step(position: int, step: Any) -> str:
    if not isinstance(step, Mapping):
        return (
            f'<details class="step"><summary>#{position} <b>step</b></summary>'
            f"<pre>{_e(_pretty(step))}</pre></details>"
        )
    index = step.get("index", position)
    role = step.get("role") or step.get("kind") or "step"
    fields = []
    for key, value in step.items():
        if key in ("index", "role", "kind") or value is None:
            continue
        fields.append(
            f'<div class="field"><div class="key">{_e(key)}</div><pre>{_e(_pretty(value))}</pre></div>'
        )
    return (
        f'<details class="step"><summary>#{_e(index)} <b>{_e(role)}</b> '
        f'<span class="muted">{_e(_preview(step))}</span></summary>{"".join(fields)}</details>'
    )


def _load_trajectory(run_dir: Path, rel: str | None) -> tuple[Any, str | None]:
    """The parsed trajectory, or ``(None, why)`` when it is missing or unreadable."""
    if not rel:
        return None, "missing (no trajectory path recorded)"
    path = run_dir / rel
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        return None, f"missing ({rel})"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"unreadable ({rel}: {exc.__class__.__name__}: {exc})"


def _render_trajectory(run_dir: Path, rel: str | None) -> str:
    doc, problem = _load_trajectory(run_dir, rel)
    if problem is not None:
        return f'<p class="missing">trajectory {_e(problem)}</p>'
    steps = doc.get("steps") if isinstance(doc, dict) else None
    if not isinstance(steps, list):
        return f'<p class="muted">no "steps" list; the whole file:</p><pre>{_e(_pretty(doc))}</pre>'
    rest = {k: v for k, v in doc.items() if k != "steps"}
    meta = (
        f'<details class="meta"><summary>trajectory fields</summary><pre>{_e(_pretty(rest))}</pre></details>'
        if rest
        else ""
    )
    return (
        meta
        + f'<p class="muted">{len(steps)} steps</p>'
        + "".join(_render_step(i, s) for i, s in enumerate(steps))
    )


def _render_trial(run_dir: Path, trial: Mapping[str, Any]) -> str:
    status = str(trial.get("status"))
    cls = "ok" if trial.get("passed") is True else ("infra" if status == INFRA_FAIL else "fail")
    outcome = "pass" if trial.get("passed") is True else ("excluded" if not is_scored(trial) else "fail")
    record = {k: v for k, v in trial.items() if k != "trajectory"}
    search = f"{trial.get('task')} {status} {trial.get('domain') or ''} {outcome}".lower()
    return (
        f'<details class="trial" data-search="{_e(search)}"><summary>'
        f'<span class="badge {cls}">{_e(outcome)}</span> <b>{_e(trial.get("task"))}</b> '
        f'<span class="muted">attempt {_e(trial.get("attempt"))} · {_e(status)} · reward '
        f"{_e(trial.get('reward'))} · {_e(trial.get('steps'))} steps</span></summary>"
        f'<details class="meta"><summary>trial record</summary><pre>{_e(_pretty(record))}</pre></details>'
        f"{_render_trajectory(run_dir, trial.get('trajectory'))}</details>"
    )


# -- the page -----------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1100px;
color:#1d232b;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde2e8}
.muted{color:#68727d}.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid #dde2e8;border-radius:6px;padding:8px 12px;min-width:150px}
.card .v{font-size:20px;font-weight:600}.card .s{font-size:12px;color:#68727d}
table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #eef0f3;text-align:left}
.charts{display:flex;flex-wrap:wrap;gap:24px}figure{margin:0}figcaption{font-weight:600;margin-bottom:4px}
svg text{font-size:11px;fill:#3a434d}.grid{stroke:#e6e9ee}.bar{fill:#4c78a8}.err{stroke:#1d232b;
stroke-width:1.5;fill:none}.ok{fill:#54a24b}.fail{fill:#e45756}.infra{fill:#9d9d9d}
.badge{display:inline-block;min-width:58px;text-align:center;border-radius:4px;color:#fff;font-size:12px}
.badge.ok{background:#54a24b}.badge.fail{background:#e45756}.badge.infra{background:#9d9d9d}
details{margin:2px 0}details.trial{border:1px solid #dde2e8;border-radius:6px;padding:4px 8px;margin:6px 0}
details.step{border-left:3px solid #c9d3de;padding-left:8px;margin-left:4px}summary{cursor:pointer}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:6px;border-radius:4px;margin:4px 0;
max-height:480px;overflow:auto}.key{font-size:12px;color:#68727d}.missing{color:#b8451c}
.tools{margin:8px 0}.tools input{width:280px;padding:3px}
"""

_JS = """
function setAll(open){document.querySelectorAll('#trials details').forEach(d=>{d.open=open;});}
function filterTrials(q){q=q.toLowerCase();document.querySelectorAll('details.trial').forEach(d=>{
d.style.display=d.dataset.search.includes(q)?'':'none';});}
"""


def _card(label: str, value: str, sub: str = "") -> str:
    return (
        f'<div class="card"><div class="s">{_e(label)}</div><div class="v">{_e(value)}</div>'
        f'<div class="s">{_e(sub)}</div></div>'
    )


def _group_rows(
    summary: Mapping[str, Any], key: str
) -> list[tuple[str, float | None, Sequence[float] | None, int]]:
    return [(name, g["pass_rate"], g["pass_rate_ci95"], g["n"]) for name, g in summary[key].items()]


def render_report(results: Mapping[str, Any], run_dir: str | Path) -> str:
    """The report page for ``results`` (as returned by :func:`load_results`) as one HTML string."""
    run_dir = Path(run_dir)
    trials: list[Mapping[str, Any]] = list(results["trials"])
    k = results.get("k") or max(Counter(task_key(t) for t in trials).values(), default=1)
    s = summarize(trials, k)
    agent = results.get("agent") or "unknown agent"
    tok = s["tokens"]
    steps = s["steps_to_success"]
    cards = [
        _card("pass rate", _pct(s["pass_rate"]), f"95% CI {_ci(s['pass_rate_ci95'])}"),
        _card(
            "mean reward",
            _num(s["mean_reward"], 3) if s["mean_reward"] is not None else "—",
            f"95% CI {_ci(s['mean_reward_ci95'], pct=False)}" if s["mean_reward_ci95"] else "",
        ),
        _card("tasks / trials", f"{s['n_tasks']} / {s['n_trials']}", f"k = {k}"),
        _card("infra failures", str(s["n_infra_fail"]), "excluded from every rate"),
        _card("tool-call accuracy", _pct(s["tool_call_accuracy"]), "valid / all calls"),
        _card("steps to success", _num(steps["mean"], 1), f"median {_num(steps['median'], 1)}"),
        _card("tokens", f"{tok['prompt'] + tok['completion']:,}", f"{tok['cached']:,} cached prompt tokens"),
        _card("cost", f"${s['cost_usd']:,.4f}", f"{_num(s['wall_s'], 1)} s of trial time"),
    ]
    pass_k = "".join(f"<tr><td>pass@{_e(kk)}</td><td>{_pct(v)}</td></tr>" for kk, v in s["pass_at_k"].items())
    req_rows = [
        (b["label"], b["pass_rate"], b["pass_rate_ci95"], b["n"]) for b in success_by_required_steps(trials)
    ]
    scored = [t for t in trials if is_scored(t)]
    step_values = [float(t["steps"]) for t in scored if isinstance(t.get("steps"), int | float)]
    token_values = [
        float(sum(v for kind, v in (t.get("tokens") or {}).items() if kind in ("prompt", "completion") and v))
        for t in scored
        if t.get("tokens")
    ]
    trial_html = "".join(
        _render_trial(run_dir, t)
        for t in sorted(trials, key=lambda t: (str(t.get("task")), int(t.get("attempt") or 0)))
    )
    digest = results.get("policy_digest")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>Ridgeline report — {_e(agent)}</title><style>{_CSS}</style></head><body>
<h1>Evaluation report</h1>
<div class="muted">agent <b>{_e(agent)}</b>{f" · policy digest <code>{_e(digest)}</code>" if digest else ""}
 · run <code>{_e(run_dir)}</code></div>
<h2>Summary</h2><div class="cards">{"".join(cards)}</div>
<p class="muted">Rates count scored trials only (infrastructure failures are reported apart). Pass-rate
intervals are Wilson 95% intervals; the reward interval is a bootstrap over tasks. pass@k is the unbiased
estimator, averaged over tasks.</p>
<table>{pass_k}</table>
<h2>By domain and difficulty</h2><div class="charts">
{_rate_chart("pass rate by domain", _group_rows(s, "by_domain"))}
{_rate_chart("pass rate by difficulty", _group_rows(s, "by_difficulty"))}
{_rate_chart("pass rate by required steps", req_rows)}</div>
<h2>Distributions</h2><div class="charts">
{_histogram("steps per trial", step_values, "steps")}
{_histogram("tokens per trial (prompt + completion)", token_values, "tokens")}</div>
<h2>Failure modes</h2>{_status_chart(s["status_counts"])}
<h2>Trials</h2>
<div class="tools"><input type="search" placeholder="filter: task, status, domain, pass/fail"
 oninput="filterTrials(this.value)"> <button onclick="setAll(true)">expand all</button>
 <button onclick="setAll(false)">collapse all</button></div>
<div id="trials">{trial_html}</div>
<script>{_JS}</script></body></html>
"""


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the HTML report of the run in ``run_dir`` and return its path.

    Args:
        run_dir: an eval output directory holding ``results.json`` (or the file itself).
        out: where to write; defaults to ``RUN_DIR/report.html``.

    Raises:
        UserError: ``results.json`` is missing or malformed (see :func:`load_results`), or the
            report cannot be written.
    """
    results = load_results(run_dir)
    base = Path(results["run_dir"])
    target = Path(out) if out is not None else base / "report.html"
    page = render_report(results, base)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{target}: cannot write the report ({exc.strerror or exc})") from None
    return target


__all__ = ["MAX_FIELD_CHARS", "render_report", "write_report"]
