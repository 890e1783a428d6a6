"""``finance``: research over generated CSV/JSON market and accounting data.

Questions (returns, drawdowns) are answered in ``/logs/agent/answer.txt``; reports (quarterly
aggregates, reconciliations) are files checked numerically. Every instruction states its tolerance.
Levels add tickers, files, missing data, corporate actions, currencies and fee lines, each of which
is a step a careless analysis gets wrong (``solution/wrong.sh`` makes one such mistake).
"""

from __future__ import annotations

import datetime as dt
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence

from ridgeline.tasks.suites.base import (
    GRADE_TEST_SH,
    Checkpoint,
    Generator,
    TaskDraft,
    TaskFamily,
    dumps_json,
    grader,
    heredoc,
    register_family,
)

_TICKERS = ("ALDR", "BRKL", "CYPR", "DUNE", "ELMO", "FERN", "GLEN", "HOLT", "IVRY", "JETT", "KILN")


def _business_days(start: dt.date, n: int) -> list[str]:
    out: list[str] = []
    d = start
    while len(out) < n:
        if d.weekday() < 5:
            out.append(d.isoformat())
        d += dt.timedelta(days=1)
    return out


def _walk(rng: random.Random, n: int) -> list[float]:
    price, out = rng.uniform(20, 300), []
    drift, vol = rng.uniform(-0.001, 0.0015), rng.uniform(0.01, 0.03)
    for _ in range(n):
        price = max(1.0, price * (1 + rng.gauss(drift, vol)))
        out.append(round(price, 2))
    return out


def _csv(header: str, rows: Sequence[Sequence[object]]) -> str:
    return header + "\n" + "".join(",".join(str(c) for c in r) + "\n" for r in rows)


def _pct(x: float) -> float:
    return round(100 * x, 4)


# ---------------------------------------------------------------------------------------------- returns

_RETURNS_SOLVER = r"""import csv, glob, json, sys
level, d1, d2 = int(sys.argv[1]), sys.argv[2], sys.argv[3]
closes = {}
for path in sorted(glob.glob("/app/data/**/*.csv", recursive=True)):
    for row in csv.DictReader(open(path)):
        closes[(row.get("ticker", "ONE"), row["date"])] = float(row["close"])
splits = json.load(open("/app/data/splits.json")) if level == 3 else []
best = None
for t in sorted({t for t, _ in closes}):
    factor = 1.0
    for s in splits:
        if s["ticker"] == t and d1 < s["date"] <= d2:
            factor *= s["ratio"]
    r = 100 * (closes[(t, d2)] * factor / closes[(t, d1)] - 1)
    if best is None or r > best[1]:
        best = (t, r)
with open("/logs/agent/answer.txt", "w") as f:
    f.write(f"{best[1]:.4f}\n" if level == 1 else f"{best[0]} {best[1]:.4f}\n")
"""

_ANSWER_BODY = """
answer = read_answer()
if TICKER is not None:
    tokens = re.findall(r"\\b[A-Z]{4}\\b", answer)
    check(tokens == [TICKER], f"expected exactly one ticker symbol in the answer, got {tokens}")
    answer = re.sub(r"\\b[A-Z]{4}\\b", " ", answer)
if DATE is not None:
    dates = re.findall(r"\\d{4}-\\d{2}-\\d{2}", answer)
    check(dates == [DATE], f"expected exactly one date (YYYY-MM-DD) in the answer, got {dates}")
    answer = re.sub(r"\\d{4}-\\d{2}-\\d{2}", " ", answer)
got = parse_number(answer)
check(close(got, VALUE, TOL), f"number {got} is not within {TOL} of the expected value")
"""


def _returns(rng: random.Random, level: int) -> TaskDraft:
    n_tickers, n_days = {1: (1, 120), 2: (3, 250), 3: (5, 500)}[level]
    tickers = sorted(rng.sample(_TICKERS, n_tickers))
    days = _business_days(dt.date(2023, 1, 2), n_days)
    closes = {t: _walk(rng, n_days) for t in tickers}
    i1 = rng.randrange(0, n_days // 3)
    i2 = rng.randrange(2 * n_days // 3, n_days)
    d1, d2 = days[i1], days[i2]
    splits: list[dict[str, object]] = []
    if level == 3:
        # Split the true winner (and one other): an unadjusted analysis then gets the answer wrong.
        winner = max(tickers, key=lambda t: closes[t][i2] / closes[t][i1])
        for t in [winner, rng.choice([t for t in tickers if t != winner])]:
            at = rng.randrange(i1 + 1, i2)
            ratio = rng.choice([2, 3, 4])
            splits.append({"ticker": t, "date": days[at], "ratio": ratio})
            closes[t] = closes[t][:at] + [round(p / ratio, 2) for p in closes[t][at:]]
        splits.sort(key=lambda s: (str(s["date"]), str(s["ticker"])))
    files: dict[str, str | bytes] = {}
    if level == 1:
        files["environment/files/data/prices.csv"] = _csv(
            "date,close", [(d, f"{closes[tickers[0]][i]:.2f}") for i, d in enumerate(days)]
        )
    else:
        by_year: dict[str, list[tuple[object, ...]]] = defaultdict(list)
        for i, d in enumerate(days):
            for t in tickers:
                by_year[d[:4] if level == 3 else "prices"].append((d, t, f"{closes[t][i]:.2f}"))
        for key, rows in by_year.items():
            name = f"prices/{key}.csv" if level == 3 else "prices.csv"
            files[f"environment/files/data/{name}"] = _csv("date,ticker,close", rows)
    if level == 3:
        files["environment/files/data/splits.json"] = dumps_json(splits)
    best_t, best_r = "", -1e9
    for t in tickers:
        factor = 1.0
        for s in splits:
            if s["ticker"] == t and d1 < str(s["date"]) <= d2:
                factor *= float(str(s["ratio"]))
        p1 = float(f"{closes[t][i1]:.2f}")
        p2 = float(f"{closes[t][i2]:.2f}")
        r = _pct(p2 * factor / p1 - 1)
        if r > best_r:
            best_t, best_r = t, r
    if level == 1:
        question = (
            f"What was the total return of the stock in `/app/data/prices.csv` from the close of {d1} "
            f"to the close of {d2}, in percent?\n\nAnswer with the number only (for example `12.34`)."
        )
    else:
        question = (
            f"`/app/data/` holds daily closes for {n_tickers} tickers. Which ticker had the highest "
            f"total return from the close of {d1} to the close of {d2}, and what was that return in "
            "percent?\n\nAnswer with the ticker and the number (for example `ABCD 12.34`)."
        )
    if level == 3:
        question += (
            "\n\nPrices are split across yearly files and are **not** adjusted for the stock splits "
            "listed in `/app/data/splits.json` (a split of ratio r on date D divides the close by r "
            "from D on). Returns must be split-adjusted: what a holder of the stock earned."
        )
    instruction = f"# Stock returns\n\n{question}\n\nTolerance: ±0.01 percentage points.\n"
    solve = "#!/bin/sh\nset -e\n" + heredoc("/tmp/solve.py", _RETURNS_SOLVER)
    solve += f"python3 /tmp/solve.py {level} {d1} {d2}\n"
    out: dict[str, str | bytes] = {
        **files,
        "tests/test.sh": GRADE_TEST_SH,
        "tests/grade.py": grader(
            _ANSWER_BODY, VALUE=best_r, TOL=0.01, TICKER=best_t if level > 1 else None, DATE=None
        ),
        "solution/solve.sh": solve,
    }
    if level == 3:
        out["solution/wrong.sh"] = solve.replace('factor *= s["ratio"]', "factor *= 1")
    return TaskDraft(
        name="",
        description="Compute (split-adjusted) total returns from daily closes and answer.",
        instruction=instruction,
        files=out,
        answer=True,
        required_steps={1: 2, 2: 3, 3: 5}[level],
        metadata={"n_tickers": n_tickers, "n_days": n_days, "tolerance": 0.01},
        test_reads=(),
    )


# ---------------------------------------------------------------------------------------------- drawdown

_DRAWDOWN_SOLVER = r"""import csv, glob, json, sys
level = int(sys.argv[1])
closes, dates = {}, set()
for path in sorted(glob.glob("/app/data/**/*.csv", recursive=True)):
    for row in csv.DictReader(open(path)):
        t = row.get("ticker") or path.rsplit("/", 1)[-1][:-4]
        closes[(t, row["date"])] = float(row["close"])
        dates.add(row["date"])
shares = json.load(open("/app/data/portfolio.json")) if level > 1 else {t: 1 for t, _ in closes}
last, peak, worst, trough = {}, None, 0.0, None
for d in sorted(dates):
    for t in shares:
        if (t, d) in closes:
            last[t] = closes[(t, d)]
    value = sum(n * last[t] for t, n in shares.items())
    peak = value if peak is None else max(peak, value)
    if (peak - value) / peak > worst:
        worst, trough = (peak - value) / peak, d
with open("/logs/agent/answer.txt", "w") as f:
    f.write(f"{100 * worst:.4f} {trough}\n")
"""


def _drawdown(rng: random.Random, level: int) -> TaskDraft:
    n_tickers, n_days = {1: (1, 150), 2: (3, 300), 3: (4, 600)}[level]
    tickers = sorted(rng.sample(_TICKERS, n_tickers))
    days = _business_days(dt.date(2022, 1, 3), n_days)
    closes = {t: _walk(rng, n_days) for t in tickers}
    shares = {t: rng.randint(1, 20) * 10 for t in tickers} if level > 1 else {tickers[0]: 1}
    present = {t: [True] * n_days for t in tickers}
    if level == 3:
        for t in tickers:
            for i in rng.sample(range(1, n_days), n_days // 20):
                present[t][i] = False
    last: dict[str, float] = {}
    peak, worst, trough = 0.0, 0.0, days[0]
    for i, d in enumerate(days):
        for t in tickers:
            if present[t][i]:
                last[t] = closes[t][i]
        value = sum(n * last[t] for t, n in shares.items())
        peak = max(peak, value)
        if (peak - value) / peak > worst:
            worst, trough = (peak - value) / peak, d
    files: dict[str, str | bytes] = {}
    if level == 1:
        files["environment/files/data/prices.csv"] = _csv(
            "date,close", list(zip(days, closes[tickers[0]], strict=True))
        )
        question = (
            "What was the maximum drawdown of the close price in `/app/data/prices.csv` over the whole "
            "file, in percent (the largest fall from a running peak, as a positive number), and on which "
            "date was its trough?"
        )
    else:
        if level == 2:
            rows = [(d, t, closes[t][i]) for i, d in enumerate(days) for t in tickers]
            files["environment/files/data/prices.csv"] = _csv("date,ticker,close", rows)
        else:
            for t in tickers:
                rows3 = [(d, closes[t][i]) for i, d in enumerate(days) if present[t][i]]
                files[f"environment/files/data/prices/{t}.csv"] = _csv("date,close", rows3)
        files["environment/files/data/portfolio.json"] = dumps_json(shares)
        question = (
            "`/app/data/portfolio.json` gives the number of shares held of each ticker (buy and hold, no "
            "trades). The portfolio's value on a day is the sum of shares × close. What was the maximum "
            "drawdown of the portfolio value, in percent (largest fall from a running peak, positive), "
            "and on which date was its trough?"
        )
        if level == 3:
            question += (
                "\n\nEach ticker's closes are in `/app/data/prices/TICKER.csv`; some tickers have no row "
                "on some trading days. On such a day use that ticker's most recent earlier close. The "
                "trading days are all dates that appear in any file."
            )
    instruction = (
        f"# Maximum drawdown\n\n{question}\n\nAnswer with the number and the date, for example "
        "`23.45 2022-06-17`. Tolerance: ±0.01 percentage points; the date must match exactly.\n"
    )
    solve = (
        "#!/bin/sh\nset -e\n"
        + heredoc("/tmp/solve.py", _DRAWDOWN_SOLVER)
        + f"python3 /tmp/solve.py {level}\n"
    )
    out: dict[str, str | bytes] = {
        **files,
        "tests/test.sh": GRADE_TEST_SH,
        "tests/grade.py": grader(_ANSWER_BODY, VALUE=_pct(worst), TOL=0.01, TICKER=None, DATE=trough),
        "solution/solve.sh": solve,
    }
    if level >= 2:
        # Equal weights instead of the stated share counts: a common slip.
        out["solution/wrong.sh"] = solve.replace(
            'json.load(open("/app/data/portfolio.json"))',
            "dict.fromkeys([" + ", ".join(repr(t) for t in tickers) + "], 1)",
        )
    return TaskDraft(
        name="",
        description="Find the maximum drawdown (and its trough) of a stock or a buy-and-hold portfolio.",
        instruction=instruction,
        files=out,
        answer=True,
        required_steps={1: 2, 2: 4, 3: 6}[level],
        metadata={"n_tickers": n_tickers, "n_days": n_days, "tolerance": 0.01},
        test_reads=(),
    )


# ---------------------------------------------------------------------------------------------- quarterly

_QUARTERLY_SOLVER = r"""import csv, glob, json, os
from collections import defaultdict
rows = []
for path in sorted(glob.glob("/app/data/**/*.csv", recursive=True)):
    rows += list(csv.DictReader(open(path)))
for path in sorted(glob.glob("/app/data/**/*.jsonl", recursive=True)):
    rows += [json.loads(line) for line in open(path) if line.strip()]
fx = json.load(open("/app/data/fx.json")) if os.path.exists("/app/data/fx.json") else {}
agg = defaultdict(lambda: [0.0, 0.0])
for r in rows:
    month = int(r["date"][5:7])
    q = f"{r['date'][:4]}-Q{(month - 1) // 3 + 1}"
    amount = float(r["amount"])
    cur = r.get("currency", "USD")
    if cur != "USD":
        amount *= fx[r["date"][:7]][cur]
    if r["type"] == "revenue":
        agg[q][0] += amount
    elif r["type"] == "refund":
        agg[q][0] -= amount
    else:
        agg[q][1] += amount
os.makedirs("/app/out", exist_ok=True)
with open("/app/out/quarterly.csv", "w") as f:
    f.write("quarter,revenue,expenses,net\n")
    for q in sorted(agg):
        rev, exp = agg[q]
        f.write(f"{q},{rev:.2f},{exp:.2f},{rev - exp:.2f}\n")
"""

_QUARTERLY_BODY = """
import csv
text = read_text("/app/out/quarterly.csv")
if text is not None:
    rows = list(csv.reader(text.strip().splitlines()))
    header = ["quarter", "revenue", "expenses", "net"]
    check(rows[:1] == [header], "header must be quarter,revenue,expenses,net")
    got = {r[0]: r[1:] for r in rows[1:] if r}
    check(sorted(got) == sorted(EXPECTED), f"quarters {sorted(got)}, expected {sorted(EXPECTED)}")
    check([r[0] for r in rows[1:] if r] == sorted(EXPECTED), "rows must be sorted by quarter")
    for q, want in EXPECTED.items():
        values = got.get(q, [])
        for name, w, g in zip(["revenue", "expenses", "net"], want, values + [None] * 3):
            try:
                value = float(g)
            except (TypeError, ValueError):
                value = None
            check(close(value, w, TOL), f"{q} {name}: {g} is not within {TOL} of the expected value")
"""


def _quarterly(rng: random.Random, level: int) -> TaskDraft:
    n_rows, years = {1: (200, [2023]), 2: (900, [2022, 2023]), 3: (2400, [2022, 2023])}[level]
    currencies = ["USD"] if level < 3 else ["USD", "EUR", "GBP"]
    fx = {
        f"{y}-{m:02d}": {"EUR": round(rng.uniform(1.02, 1.15), 4), "GBP": round(rng.uniform(1.18, 1.32), 4)}
        for y in years
        for m in range(1, 13)
    }
    types = ["revenue", "expense"] if level == 1 else ["revenue", "revenue", "expense", "refund"]
    records = []
    for i in range(n_rows):
        y, m = rng.choice(years), rng.randint(1, 12)
        date = dt.date(y, m, rng.randint(1, 28)).isoformat()
        records.append(
            {
                "id": f"T{i:05d}",
                "date": date,
                "type": rng.choice(types),
                "amount": f"{rng.uniform(5, 5000):.2f}",
                "currency": rng.choice(currencies),
            }
        )
    agg: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in records:
        q = f"{r['date'][:4]}-Q{(int(r['date'][5:7]) - 1) // 3 + 1}"
        amount = float(r["amount"]) * (fx[r["date"][:7]][r["currency"]] if r["currency"] != "USD" else 1.0)
        if r["type"] == "revenue":
            agg[q][0] += amount
        elif r["type"] == "refund":
            agg[q][0] -= amount
        else:
            agg[q][1] += amount
    expected = {q: [round(a, 2), round(b, 2), round(a - b, 2)] for q, (a, b) in sorted(agg.items())}
    tol = 0.01 if level < 3 else 0.5
    files: dict[str, str | bytes] = {}
    cols = ["id", "date", "type", "amount"] + (["currency"] if level == 3 else [])
    if level == 1:
        files["environment/files/data/transactions.csv"] = _csv(
            ",".join(cols), [tuple(r[c] for c in cols) for r in records]
        )
    else:
        by_month: dict[str, list[dict[str, str]]] = defaultdict(list)
        for r in records:
            by_month[r["date"][:7]].append(r)
        for month, rs in sorted(by_month.items()):
            rs.sort(key=lambda r: (r["date"], r["id"]))
            if level == 3 and int(month[5:]) % 3 == 0:
                body = "".join(dumps_json({c: r[c] for c in cols}, indent=None) + "\n" for r in rs)
                files[f"environment/files/data/{month}.jsonl"] = body
            else:
                files[f"environment/files/data/{month}.csv"] = _csv(
                    ",".join(cols), [tuple(r[c] for c in cols) for r in rs]
                )
    if level == 3:
        files["environment/files/data/fx.json"] = dumps_json(fx)
    rules = [
        "`revenue` is the sum of `revenue` amounts"
        + (" minus the sum of `refund` amounts" if level > 1 else ""),
        "`expenses` is the sum of `expense` amounts",
        "`net` is `revenue - expenses`",
    ]
    where = "`/app/data/transactions.csv`" if level == 1 else "every monthly file in `/app/data/`"
    extra = ""
    if level == 3:
        extra = (
            "\nSome months are stored as JSON lines (`.jsonl`, one object per line, same fields). "
            "Amounts are "
            "in the row's `currency`; convert them to USD with the rate for the transaction's month in "
            "`/app/data/fx.json` (`USD = amount × rate`).\n"
        )
    instruction = (
        f"""# Quarterly aggregates

Aggregate the transactions in {where} by calendar quarter (`YYYY-Qn`, Q1 = January–March).
{extra}
Write `/app/out/quarterly.csv` with the header `quarter,revenue,expenses,net` and one row per quarter
that has transactions, sorted by quarter, where
"""
        + "\n".join(f"- {r}" for r in rules)
        + f"""

Each value must be within ±{tol} of the exact figure (round to cents; do not round intermediate values).
"""
    )
    solve = "#!/bin/sh\nset -e\n" + heredoc("/tmp/solve.py", _QUARTERLY_SOLVER) + "python3 /tmp/solve.py\n"
    wrong = solve.replace("(month - 1) // 3 + 1", "month // 3 + 1")
    return TaskDraft(
        name="",
        description="Aggregate transactions into quarterly revenue, expenses and net.",
        instruction=instruction,
        files={
            **files,
            "tests/test.sh": GRADE_TEST_SH,
            "tests/grade.py": grader(_QUARTERLY_BODY, EXPECTED=expected, TOL=tol),
            "solution/solve.sh": solve,
            "solution/wrong.sh": wrong,
        },
        required_steps={1: 3, 2: 5, 3: 8}[level],
        metadata={"n_rows": n_rows, "tolerance": tol},
        test_reads=("out/quarterly.csv",),
        checkpoints=(Checkpoint("report-written", "test -s /app/out/quarterly.csv"),),
    )


# ---------------------------------------------------------------------------------------------- reconcile

_RECONCILE_SOLVER = r"""import csv, glob, json, os, re, sys
level = int(sys.argv[1])
ledger = {r["id"]: float(r["amount"]) for r in csv.DictReader(open("/app/data/ledger.csv"))}
bank = []
for path in sorted(glob.glob("/app/data/bank*.json")):
    bank += json.load(open(path))
matched, extra, mismatch, fees = set(), [], [], 0.0
for b in bank:
    amount = b["amount_cents"] / 100 if "amount_cents" in b else b["amount"]
    if b["ref"].startswith("FEE-"):
        fees += amount
        continue
    m = re.search(r"ref (L\d+)", b["memo"], re.I)
    lid = m.group(1).upper() if m else None
    if lid in ledger:
        matched.add(lid)
        if abs(ledger[lid] - amount) > 0.005:
            mismatch.append(lid)
    else:
        extra.append(b["ref"])
report = {"missing_in_bank": sorted(set(ledger) - matched), "missing_in_ledger": sorted(extra),
          "amount_mismatch": sorted(mismatch), "ledger_total": round(sum(ledger.values()), 2)}
if level == 3:
    report["fees_total"] = round(fees, 2)
os.makedirs("/app/out", exist_ok=True)
json.dump(report, open("/app/out/reconciliation.json", "w"), indent=2, sort_keys=True)
"""

_RECONCILE_BODY = """
text = read_text("/app/out/reconciliation.json")
try:
    got = json.loads(text) if text is not None else None
except ValueError:
    got = None
if check(isinstance(got, dict), "reconciliation.json is not a JSON object"):
    check(sorted(got) == sorted(EXPECTED), f"keys {sorted(got)}, expected {sorted(EXPECTED)}")
    for k, v in EXPECTED.items():
        if isinstance(v, list):
            check(got.get(k) == v, f"{k} differs from the expected list")
        else:
            g = got.get(k)
            check(isinstance(g, (int, float)) and close(float(g), v, 0.01), f"{k} is not within 0.01")
"""


def _reconcile(rng: random.Random, level: int) -> TaskDraft:
    n = {1: 30, 2: 150, 3: 400}[level]
    ledger = [(f"L{i:04d}", round(rng.uniform(10, 9000), 2)) for i in range(n)]
    bank: list[dict[str, object]] = []
    missing_in_bank, missing_in_ledger, mismatch = [], [], []
    for i, (lid, amount) in enumerate(ledger):
        roll = rng.random()
        if roll < 0.08:
            missing_in_bank.append(lid)
            continue
        got = amount
        if roll > 0.93:
            got = round(amount + rng.choice([-1, 1]) * rng.choice([0.01, 0.1, 1.0, 10.0]), 2)
            mismatch.append(lid)
        ref_word = rng.choice(["ref", "REF", "Ref"]) if level > 1 else "ref"
        bank.append(
            {
                "ref": f"B{i:05d}",
                "memo": f"payment {ref_word} {lid} {rng.choice(['ACH', 'WIRE', 'CARD'])}",
                "amount": got,
                "month": rng.randint(1, 3),
            }
        )
    for j in range(max(2, n // 25)):
        ref = f"B9{j:04d}"
        missing_in_ledger.append(ref)
        bank.append(
            {
                "ref": ref,
                "memo": "unknown deposit",
                "amount": round(rng.uniform(10, 900), 2),
                "month": rng.randint(1, 3),
            }
        )
    fees = 0.0
    if level == 3:
        for j in range(12):
            fee = round(rng.uniform(1, 30), 2)
            fees += fee
            bank.append(
                {"ref": f"FEE-{j:03d}", "memo": "monthly fee", "amount": fee, "month": rng.randint(1, 3)}
            )
    rng.shuffle(bank)
    expected: dict[str, object] = {
        "missing_in_bank": sorted(missing_in_bank),
        "missing_in_ledger": sorted(missing_in_ledger),
        "amount_mismatch": sorted(mismatch),
        "ledger_total": round(sum(a for _, a in ledger), 2),
    }
    if level == 3:
        expected["fees_total"] = round(fees, 2)

    def entry(b: dict[str, object]) -> dict[str, object]:
        e = {"ref": b["ref"], "memo": b["memo"]}
        if level == 1:
            e["amount"] = b["amount"]
        else:
            e["amount_cents"] = round(float(str(b["amount"])) * 100)
        return e

    files: dict[str, str | bytes] = {"environment/files/data/ledger.csv": _csv("id,amount", list(ledger))}
    if level == 3:
        for month in (1, 2, 3):
            files[f"environment/files/data/bank-2024-{month:02d}.json"] = dumps_json(
                [entry(b) for b in bank if b["month"] == month]
            )
    else:
        files["environment/files/data/bank.json"] = dumps_json([entry(b) for b in bank])
    keys = [
        "`missing_in_bank`: ledger ids with no bank entry, sorted",
        "`missing_in_ledger`: bank `ref`s of entries that match no ledger id, sorted",
        "`amount_mismatch`: ledger ids whose bank amount differs from the ledger amount, sorted",
        "`ledger_total`: the sum of all ledger amounts (±0.01)",
    ]
    if level == 3:
        keys.append(
            "`fees_total`: the sum of the bank's fee entries (refs starting `FEE-`; they are not "
            "unmatched entries) (±0.01)"
        )
    bank_desc = "`/app/data/bank.json`" if level < 3 else "the monthly statements `/app/data/bank-*.json`"
    instruction = (
        f"""# Reconcile a ledger with bank statements

`/app/data/ledger.csv` lists payments (`id,amount`, amounts in dollars). {bank_desc} lists bank entries;
an entry belongs to ledger id `LNNNN` when its `memo` contains `ref LNNNN` (the word `ref` in any case).
{"Bank amounts are in **cents** (`amount_cents`)." if level > 1 else "Bank amounts are in dollars."}

Write `/app/out/reconciliation.json`, an object with exactly these keys:

"""
        + "\n".join(f"- {k}" for k in keys)
        + "\n"
    )
    solve = (
        "#!/bin/sh\nset -e\n"
        + heredoc("/tmp/solve.py", _RECONCILE_SOLVER)
        + f"python3 /tmp/solve.py {level}\n"
    )
    out: dict[str, str | bytes] = {
        **files,
        "tests/test.sh": GRADE_TEST_SH,
        "tests/grade.py": grader(_RECONCILE_BODY, EXPECTED=expected),
        "solution/solve.sh": solve,
    }
    if level >= 2:
        out["solution/wrong.sh"] = solve.replace(", re.I)", ")")  # misses "REF"/"Ref" memos
    return TaskDraft(
        name="",
        description="Match ledger payments to bank entries and report the differences.",
        instruction=instruction,
        files=out,
        required_steps={1: 3, 2: 4, 3: 6}[level],
        metadata={"n_ledger": n, "tolerance": 0.01},
        test_reads=("out/reconciliation.json",),
        checkpoints=(Checkpoint("report-written", "test -s /app/out/reconciliation.json"),),
    )


@register_family
class FinanceFamily(TaskFamily):
    name = "finance"
    version = 1
    domain = "finance"
    description = (
        "Financial research on CSV/JSON data: returns, drawdowns, quarterly aggregates, reconciliation."
    )

    def kinds(self) -> Mapping[str, Generator]:
        return {"returns": _returns, "drawdown": _drawdown, "quarterly": _quarterly, "reconcile": _reconcile}
