"""``ridgeline compare`` and ``ridgeline report``: read eval runs, compare them, render them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from ridgeline.cli._app import app, console
from ridgeline.errors import UserError

_VERDICT_STYLE = {"better": "bold green", "worse": "bold red", "indistinguishable": "bold yellow"}
_SHORT = {"indistinguishable": "n.s."}


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def _pts(v: float | None) -> str:
    """A difference of rates, in percentage points."""
    return "—" if v is None else f"{100 * v:+.1f}"


@app.command("compare")
def compare(
    run_a: Annotated[Path, typer.Argument(help="Baseline run directory (holding results.json).")],
    run_b: Annotated[Path, typer.Argument(help="Candidate run directory.")],
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the comparison as JSON here.")
    ] = None,
) -> None:
    """Compare run B against run A on the tasks they share: paired difference, exact test, flips."""
    from ridgeline.eval.compare import compare_runs
    from ridgeline.eval.metrics import load_results

    a, b = load_results(run_a), load_results(run_b)
    cmp = compare_runs(a, b)

    table = Table(
        title=f"B − A (points), tasks paired by {cmp.paired_by}",
        caption="flips: +fail→pass/−pass→fail · p: exact McNemar · n.s.: indistinguishable",
        caption_justify="left",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1, 0, 0),
    )
    table.add_column("", no_wrap=True, max_width=20)
    for col in ("tasks", "A", "B", "B−A", "95% CI", "flips", "p"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    for label, st in [("all", cmp.overall), *cmp.by_domain.items()]:
        table.add_row(
            Text(label, style="bold" if label == "all" else ""),
            str(st.n_tasks),
            _pct(st.a_pass_rate),
            _pct(st.b_pass_rate),
            _pts(st.diff),
            f"[{_pts(st.diff_ci95[0])}, {_pts(st.diff_ci95[1])}]" if st.diff_ci95 else "—",
            f"+{st.fail_to_pass}/−{st.pass_to_fail}",
            f"{st.mcnemar_p:.2g}",
            Text(_SHORT.get(st.verdict, st.verdict), style=_VERDICT_STYLE[st.verdict]),
        )
        if label == "all" and cmp.by_domain:
            table.add_section()
    console.print(
        Text.assemble(
            "A: ", (cmp.agent_a or str(run_a), "bold"), "   B: ", (cmp.agent_b or str(run_b), "bold")
        )
    )
    console.print(table)
    for title, names in (
        ("fail → pass", cmp.improved),
        ("pass → fail", cmp.regressed),
        ("only in A", cmp.only_in_a),
        ("only in B", cmp.only_in_b),
        ("no scored trials in a run", cmp.unscored),
    ):
        if names:
            console.print(
                Text.assemble((f"{title} ({len(names)}): ", "bold"), ", ".join(names)), soft_wrap=True
            )
    for note in cmp.notes:
        console.print(Text(f"note: {note}", style="dim"), soft_wrap=True)
    console.print(
        Text.assemble(
            "verdict: B is ",
            (cmp.verdict, _VERDICT_STYLE[cmp.verdict]),
            " from" if cmp.verdict == "indistinguishable" else " than",
            f" A (exact McNemar on tasks, alpha {cmp.alpha})",
        )
    )
    if json_out is not None:
        try:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(cmp.model_dump_json(indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{json_out}: cannot write the comparison ({exc.strerror or exc})") from None
        console.print(Text(f"wrote {json_out}"), soft_wrap=True)


@app.command("report")
def report(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (holding results.json).")],
    out: Annotated[
        Path | None, typer.Option("--out", help="HTML file to write (default RUN_DIR/report.html).")
    ] = None,
) -> None:
    """Write a self-contained HTML report of a run and print its path."""
    from ridgeline.eval.report import write_report

    path = write_report(run_dir, out)
    console.print(Text(str(path)), soft_wrap=True)
