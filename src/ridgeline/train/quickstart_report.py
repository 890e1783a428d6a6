"""``quickstart.html``: before/after pass rates with CIs, by domain and difficulty, curves, wall times.

Self-contained HTML (inline CSS and SVG, no scripts, nothing fetched); the per-run reports written by
:func:`ridgeline.eval.report.write_report` are linked from it.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:1em 0}
td,th{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}.up{color:#080}.down{color:#b00}
.charts{display:flex;flex-wrap:wrap;gap:1em}.chart{border:1px solid #ddd;padding:.5em}
.verdict{font-size:1.2em;font-weight:bold}
"""


def _pct(x: Any) -> str:
    return "–" if not isinstance(x, int | float) else f"{100 * x:.1f}%"


def _ci(ci: Any) -> str:
    if not isinstance(ci, Sequence) or len(ci) != 2 or ci[0] is None:
        return ""
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _delta(a: Any, b: Any) -> str:
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return "–"
    d = 100 * (b - a)
    cls = "up" if d > 0 else "down" if d < 0 else ""
    return f'<span class="{cls}">{d:+.1f}</span>'


def _rows(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    out = []
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key, {}), after.get(key, {})
        out.append(
            f"<tr><td>{html.escape(key)}</td><td>{b.get('n', '')}</td>"
            f"<td>{_pct(b.get('pass_rate'))} {_ci(b.get('pass_rate_ci95'))}</td>"
            f"<td>{_pct(a.get('pass_rate'))} {_ci(a.get('pass_rate_ci95'))}</td>"
            f"<td>{_delta(b.get('pass_rate'), a.get('pass_rate'))}</td></tr>"
        )
    return "".join(out)


def svg_chart(
    title: str, xs: Sequence[float], ys: Sequence[float | None], width: int = 300, height: int = 160
) -> str:
    """A small line chart as inline SVG (points without a value are skipped)."""
    pts = [(x, y) for x, y in zip(xs, ys, strict=False) if y is not None]
    head = f'<div class="chart"><div>{html.escape(title)}</div>'
    if not pts:
        return head + "<div>(no data)</div></div>"
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    if x1 == x0:
        x1 = x0 + 1
    pad = 28

    def sx(x: float) -> float:
        return pad + (x - x0) / (x1 - x0) * (width - 2 * pad)

    def sy(y: float) -> float:
        return height - pad + (y - y0) / (y1 - y0) * (2 * pad - height)

    line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
    return (
        head + f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
        f'<rect x="{pad}" y="{pad}" width="{width - 2 * pad}" height="{height - 2 * pad}" '
        'fill="none" stroke="#ccc"/>'
        f'<polyline points="{line}" fill="none" stroke="#1f6feb" stroke-width="1.5"/>'
        f'<text x="2" y="{pad + 4}" font-size="10">{y1:.3g}</text>'
        f'<text x="2" y="{height - pad}" font-size="10">{y0:.3g}</text>'
        f'<text x="{pad}" y="{height - 8}" font-size="10">step {x0:g}</text>'
        f'<text x="{width - pad - 40}" y="{height - 8}" font-size="10">{x1:g}</text>'
        "</svg></div>"
    )


def write_quickstart_html(result: Mapping[str, Any], path: Path) -> Path:
    """Write the summary page of a quickstart result (``quickstart.json``'s content) to ``path``."""
    before, after, cmp = result["before"], result["after"], result["compare"]
    curves = result.get("curves") or {}
    steps = curves.get("step") or []
    charts = "".join(
        svg_chart(name, steps, curves[name])
        for name in ("reward", "pass_rate", "kl", "entropy", "generated_tokens", "turns", "step_s")
        if name in curves
    )
    phases = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{v:.1f} s</td></tr>" for k, v in result["phases"].items()
    )
    p = cmp.get("p")
    body = f"""<!doctype html><html><head><meta charset="utf-8"><title>Ridgeline quickstart</title>
<style>{_CSS}</style></head><body>
<h1>Ridgeline quickstart</h1>
<p>Suite <code>{html.escape(str(result.get("suite")))}</code>: {result["train"]["n"]} training tasks (seed
{result["train"]["seed"]}), {result["heldout"]["n"]} held-out tasks (seed {result["heldout"]["seed"]}); the
held-out tasks never feed training. Load average at the end:
{html.escape(str(result.get("load_average")))}.</p>
<p class="verdict">Held-out pass rate: {_pct(before["pass_rate"])} {_ci(before["pass_rate_ci95"])} →
{_pct(after["pass_rate"])} {_ci(after["pass_rate_ci95"])} — {html.escape(str(cmp["verdict"]))}
(Δ {_delta(0, cmp.get("diff"))} points, 95% CI {_ci(cmp.get("diff_ci95"))}, McNemar p =
{p if p is None else f"{p:.3g}"})</p>
<p>Per-run reports: <a href="eval-before/report.html">before (SFT)</a> ·
<a href="eval-after/report.html">after (GRPO)</a></p>
<h2>By domain</h2>
<table><tr><th>domain</th><th>n</th><th>before</th><th>after</th><th>Δ points</th></tr>
{_rows(before["by_domain"], after["by_domain"])}</table>
<h2>By difficulty</h2>
<table><tr><th>difficulty</th><th>n</th><th>before</th><th>after</th><th>Δ points</th></tr>
{_rows(before["by_difficulty"], after["by_difficulty"])}</table>
<h2>Training curves (GRPO)</h2><div class="charts">{charts}</div>
<h2>Wall time by phase</h2><table>{phases}</table>
</body></html>
"""
    path.write_text(body, encoding="utf-8")
    return path


__all__ = ["svg_chart", "write_quickstart_html"]
