"""``code``: repository-level bug fixing, features from a spec, and repairing broken tests.

Projects are assembled from a small library of modules whose correct source, seeded bugs and test
cases are data. Expected values are computed at generation time by executing the correct source
(our own templates, never agent code), so the generator knows exactly which tests each bug breaks:

* ``bugfix`` (SWE-bench style): FAIL_TO_PASS tests fail on the delivered code, PASS_TO_PASS tests
  pass; both must pass after the fix and a skipped test counts as failed. Level 3 puts a bug in a
  module that another module imports, so the failing test points at the wrong file.
* ``feature``: implement stubbed functions from ``SPEC.md``; hidden tests cover error cases.
* ``testrepair``: the code is right and some tests are wrong. The repaired tests must pass on the
  pristine code *and* still kill mutants that only the broken tests caught (so deleting an
  assertion is not a repair), and the package must be unchanged.

Verifier hardening (on top of :mod:`ridgeline.tasks.suites.base`): the package directory alone is
copied from ``/app`` to ``/tmp/grade`` (never a ``conftest.py``, ``pytest.ini``, ``sitecustomize.py``
or test file from the workspace), the hidden tests from ``/tests`` are placed beside it, pytest runs
there with ``-c /dev/null`` and writes JUnit XML to ``/tmp``, and ``grade.py`` (``python3 -I``)
checks each expected test id in that XML. Not covered: package code that deliberately tampers with
pytest from inside the test process — the code under test runs in the same interpreter.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ridgeline.tasks.suites.base import (
    TEST_SH_PRELUDE,
    WORDS,
    Checkpoint,
    Generator,
    TaskDraft,
    TaskFamily,
    grader,
    heredoc,
    register_family,
    sha256_hex,
)

Case = tuple[str, str, tuple[Any, ...]]  # (test name, function, arguments)
_PACKAGES = ("ledgerkit", "tidyutils", "orbitlib", "quillpy", "cinderkit", "mossworks")


@dataclass(frozen=True)
class _Unit:
    module: str
    source: str  # correct source; ``{pkg}`` stands for the package name
    bugs: tuple[tuple[str, str], ...]  # (old, new) replacements, one bug each
    deps: tuple[str, ...]
    cases: Callable[[random.Random], list[Case]]


def _text_cases(rng: random.Random) -> list[Case]:
    a, b, c = rng.sample(WORDS, 3)
    long = f"{a}{b}{c}"
    return [
        ("test_slugify_words", "slugify", (f"{a.title()}, {b}!  {c}",)),
        ("test_slugify_single", "slugify", (a.upper(),)),
        ("test_word_count", "word_count", (f"{a}  {b}\t{c}\n",)),
        ("test_truncate_short", "truncate", (a, len(a) + rng.randint(0, 5))),
        ("test_truncate_long", "truncate", (long, rng.randint(5, len(long) - 1))),
    ]


def _stats_cases(rng: random.Random) -> list[Case]:
    xs = [rng.randint(-50, 50) for _ in range(2 * rng.randint(2, 4))]
    return [
        ("test_mean", "mean", (xs,)),
        ("test_median_odd", "median", (xs[:-1],)),
        ("test_median_even", "median", (xs,)),
        ("test_clamp_inside", "clamp", (5, 0, 10)),
        ("test_clamp_above", "clamp", (rng.randint(11, 99), 0, 10)),
    ]


def _money_cases(rng: random.Random) -> list[Case]:
    return [
        ("test_to_cents_whole", "to_cents", (float(rng.randint(1, 99)),)),
        ("test_to_cents_fraction", "to_cents", (rng.choice([0.29, 0.57, 1.15, 4.35, 8.2]),)),
        ("test_split_exact", "split_evenly", (rng.randint(2, 9) * 4, 4)),
        ("test_split_remainder", "split_evenly", (rng.randint(2, 9) * 3 + 2, 3)),
        ("test_discount", "apply_discount", (rng.randint(10, 99) * 100, rng.choice([10, 20, 25]))),
    ]


def _dates_cases(rng: random.Random) -> list[Case]:
    return [
        ("test_is_leap_regular", "is_leap", (rng.choice([2019, 2020, 2023, 2024]),)),
        ("test_is_leap_century", "is_leap", (rng.choice([1700, 1800, 1900, 2100]),)),
        ("test_days_in_february", "days_in_month", (rng.choice([2020, 2021, 2000]), 2)),
        ("test_days_in_thirty_day_month", "days_in_month", (2023, rng.choice([4, 6, 9, 11]))),
        ("test_quarter_end", "quarter", (rng.choice([3, 6, 9, 12]),)),
        ("test_quarter_start", "quarter", (rng.choice([1, 4, 7, 10]),)),
    ]


def _inventory_cases(rng: random.Random) -> list[Case]:
    items = [(rng.randint(1, 9), rng.choice([0.29, 1.15, 2.5, 4.35, 0.57])) for _ in range(3)]
    return [
        ("test_stock_value", "stock_value", (items,)),
        ("test_restock_within", "restock", (2, 3, 10)),
        ("test_restock_capped", "restock", (rng.randint(5, 9), rng.randint(5, 9), 10)),
    ]


_UNITS: dict[str, _Unit] = {
    u.module: u
    for u in (
        _Unit(
            "textutil",
            """def slugify(text):
    words = "".join(c.lower() if c.isalnum() else " " for c in text).split()
    return "-".join(words)


def word_count(text):
    return len(text.split())


def truncate(text, limit):
    if len(text) <= limit:
        return text
    return text[: limit - 3] + "..."
""",
            (
                ('return "-".join(words)', 'return "_".join(words)'),
                ("return len(text.split())", 'return len(text.split(" "))'),
                ("text[: limit - 3]", "text[:limit]"),
            ),
            (),
            _text_cases,
        ),
        _Unit(
            "stats",
            """def mean(xs):
    return sum(xs) / len(xs)


def median(xs):
    s = sorted(xs)
    mid = len(s) // 2
    if len(s) % 2:
        return s[mid]
    return (s[mid - 1] + s[mid]) / 2


def clamp(x, lo, hi):
    return max(lo, min(hi, x))
""",
            (
                ("return (s[mid - 1] + s[mid]) / 2", "return s[mid]"),
                ("return max(lo, min(hi, x))", "return max(lo, x)"),
                ("return sum(xs) / len(xs)", "return sum(xs) // len(xs)"),
            ),
            (),
            _stats_cases,
        ),
        _Unit(
            "money",
            """def to_cents(amount):
    return int(round(amount * 100))


def split_evenly(total_cents, n):
    base, extra = divmod(total_cents, n)
    return [base + 1 if i < extra else base for i in range(n)]


def apply_discount(cents, percent):
    return cents - cents * percent // 100
""",
            (
                ("return int(round(amount * 100))", "return int(amount * 100)"),
                ("base + 1 if i < extra", "base + 1 if i <= extra"),
                ("return cents - cents * percent // 100", "return cents * percent // 100"),
            ),
            (),
            _money_cases,
        ),
        _Unit(
            "dates",
            """def is_leap(year):
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year, month):
    if month == 2:
        return 29 if is_leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def quarter(month):
    return (month - 1) // 3 + 1
""",
            (
                ("year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)", "year % 4 == 0"),
                ("month in (4, 6, 9, 11)", "month in (4, 6, 9)"),
                ("return (month - 1) // 3 + 1", "return month // 3 + 1"),
            ),
            (),
            _dates_cases,
        ),
        _Unit(
            "inventory",
            """from {pkg}.money import to_cents
from {pkg}.stats import clamp


def stock_value(items):
    return sum(qty * to_cents(price) for qty, price in items)


def restock(level, amount, capacity):
    return clamp(level + amount, 0, capacity)
""",
            (("return clamp(level + amount, 0, capacity)", "return level + amount"),),
            ("money", "stats"),
            _inventory_cases,
        ),
    )
}


def _namespaces(
    pkg: str, modules: Sequence[str], bugs: Mapping[str, Sequence[tuple[str, str]]]
) -> dict[str, dict[str, Any]]:
    """Execute each module's (possibly bugged) source; imports from the package are injected."""
    spaces: dict[str, dict[str, Any]] = {}
    for name in _order(modules):
        unit = _UNITS[name]
        src = _source(unit, pkg, bugs.get(name, ()))
        ns: dict[str, Any] = {}
        for dep in unit.deps:
            ns.update({k: v for k, v in spaces[dep].items() if not k.startswith("__")})
        body = "\n".join(line for line in src.splitlines() if not line.startswith(f"from {pkg}."))
        exec(compile(body, f"<{name}>", "exec"), ns)  # our own template source, at generation time
        spaces[name] = ns
    return spaces


def _order(modules: Sequence[str]) -> list[str]:
    out: list[str] = []
    for m in modules:
        for dep in _UNITS[m].deps:
            if dep not in out:
                out.append(dep)
        if m not in out:
            out.append(m)
    return out


def _source(unit: _Unit, pkg: str, bugs: Sequence[tuple[str, str]]) -> str:
    src = unit.source.replace("{pkg}", pkg)
    for old, new in bugs:
        assert old in src, (unit.module, old)
        src = src.replace(old, new)
    return src


def _call(ns: Mapping[str, Any], func: str, args: tuple[Any, ...]) -> tuple[bool, Any]:
    try:
        return True, ns[func](*args)
    except Exception as exc:  # a bug that raises
        return False, type(exc).__name__


def _test_file(
    pkg: str,
    module: str,
    cases: Sequence[Case],
    expected: Mapping[str, Any],
    neutered: frozenset[str] = frozenset(),
    import_as: Mapping[str, str] | None = None,
) -> str:
    funcs = sorted({f for _, f, _ in cases})
    names = [import_as.get(f, f) if import_as else f for f in funcs]
    out = f"from {pkg}.{module} import {', '.join(names)}\n"
    for test, func, args in cases:
        call = f"{(import_as or {}).get(func, func)}({', '.join(repr(a) for a in args)})"
        body = "assert True" if test in neutered else f"assert {call} == {expected[test]!r}"
        out += f"\n\ndef {test}():\n    {body}\n"
    return out


_PYTEST_GRADE = """
import xml.etree.ElementTree as ET
try:
    root = ET.parse("/tmp/junit.xml").getroot()
except (OSError, ET.ParseError) as exc:
    root = None
    check(False, f"no test report: {exc}")
status = {}
if root is not None:
    for tc in root.iter("testcase"):
        test_id = tc.get("classname", "").rsplit(".", 1)[-1] + "::" + tc.get("name", "")
        bad = [c.tag for c in tc if c.tag in ("failure", "error", "skipped")]
        status[test_id] = "passed" if not bad else bad[0]
for test_id in FAIL_TO_PASS + PASS_TO_PASS:
    check(status.get(test_id) == "passed", f"{test_id}: {status.get(test_id, 'not run')}")
for path, digest in UNCHANGED.items():
    try:
        with open(path, "rb") as f:
            import hashlib
            got = hashlib.sha256(f.read()).hexdigest()
    except OSError:
        got = None
    check(got == digest, f"{path} must not be modified")
"""


def _pytest_sh(pkg: str, src: str, tests: str, junit: str = "/tmp/junit.xml") -> str:
    """Shell that copies only the package from ``src`` and the tests from ``tests``, then runs pytest.

    pytest (and so the package or test code under evaluation) runs in its own session, and the whole
    process group is killed afterwards, so nothing it started in the background outlives the run.
    """
    return f"""rm -rf /tmp/grade && mkdir -p /tmp/grade/tests
cp -R {src}/{pkg} /tmp/grade/{pkg} 2>/dev/null
find /tmp/grade \\( -name conftest.py -o -name '*.pth' -o -name '*.pyc' \\) -type f -delete
cp {tests}/test_*.py /tmp/grade/tests/ 2>/dev/null
cd /tmp/grade
rm -f {junit}
export PYTHONPATH="/tmp/grade${{PYTHONPATH:+:$PYTHONPATH}}"
setsid -w sh -c 'echo $$ > /tmp/pytest.pgid; exec timeout 120 \\
  python3 -m pytest -q -p no:cacheprovider -c /dev/null --rootdir=/tmp/grade --confcutdir=/tmp/grade \\
  --junitxml={junit} tests' >/tmp/pytest.log 2>&1
kill -9 -"$(cat /tmp/pytest.pgid)" 2>/dev/null
tail -n 25 /tmp/pytest.log
"""


#: Agent-influenced code runs during verification in code tasks, so the reward is decided in a shell
#: variable and written once, last, after that code has been stopped.
_WRITE_REWARD = 'echo "$R" > /logs/verifier/reward.txt\n'
_GRADE_ONCE = "R=0\nif python3 -I /tests/grade.py; then R=1; fi\n" + _WRITE_REWARD


def _project_files(pkg: str, sources: Mapping[str, str], tests: Mapping[str, str]) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {
        f"environment/files/proj/{pkg}/__init__.py": f'"""The {pkg} package."""\n'
    }
    for m, s in sources.items():
        files[f"environment/files/proj/{pkg}/{m}.py"] = s
    for name, t in tests.items():
        files[f"environment/files/proj/tests/{name}"] = t
    return files


# ---------------------------------------------------------------------------------------------- bugfix


def _bugfix(rng: random.Random, level: int) -> TaskDraft:
    pkg = rng.choice(_PACKAGES)
    n_mod, n_bugs = {1: (2, 1), 2: (3, 2), 3: (4, 3)}[level]
    if level == 3:
        modules = ["inventory", *rng.sample(["textutil", "dates"], 1)]
    else:
        modules = rng.sample(["textutil", "stats", "money", "dates"], n_mod)
    modules = _order(modules)
    cases = {m: _UNITS[m].cases(rng) for m in modules}
    good = _namespaces(pkg, modules, {})
    expected = {m: {t: _call(good[m], f, a)[1] for t, f, a in cases[m]} for m in modules}

    def failing(bugs: Mapping[str, Sequence[tuple[str, str]]]) -> set[str]:
        spaces = _namespaces(pkg, modules, bugs)
        return {
            f"test_{m}::{t}"
            for m in modules
            for t, f, a in cases[m]
            if _call(spaces[m], f, a) != (True, expected[m][t])
        }

    # Pick bugs, each in a different module, each breaking at least one test on its own.
    chosen: dict[str, list[tuple[str, str]]] = {}
    order = ["money", "stats"] if level == 3 else []  # level 3: the root cause is in a dependency
    candidates = order + [m for m in rng.sample(modules, len(modules)) if m not in order]
    for m in candidates:
        if len(chosen) == n_bugs:
            break
        bugs = list(_UNITS[m].bugs)
        for bug in bugs[:1] if (level == 3 and m == "money") else rng.sample(bugs, len(bugs)):
            if failing({m: [bug]}):
                chosen[m] = [bug]
                break
    f2p = sorted(failing(chosen))
    all_ids = sorted(f"test_{m}::{t}" for m in modules for t, _, _ in cases[m])
    p2p = [t for t in all_ids if t not in f2p]
    tests = {f"test_{m}.py": _test_file(pkg, m, cases[m], expected[m]) for m in modules}
    buggy = {m: _source(_UNITS[m], pkg, chosen.get(m, ())) for m in modules}
    fixed = {m: _source(_UNITS[m], pkg, ()) for m in chosen}
    solve = "#!/bin/sh\nset -e\n" + "".join(heredoc(f"/app/proj/{pkg}/{m}.py", s) for m, s in fixed.items())
    last = sorted(fixed)[-1]
    wrong = "#!/bin/sh\nset -e\n" + "".join(
        heredoc(f"/app/proj/{pkg}/{m}.py", s) for m, s in fixed.items() if m != last
    )
    hint = (
        "\nA failing test does not always point at the module that holds the bug: modules import each "
        "other.\n"
        if level == 3
        else ""
    )
    instruction = f"""# Fix the failing tests

`/app/proj` is a small Python project (package `{pkg}`, tests in `/app/proj/tests`). Some tests fail:

    cd /app/proj && python3 -m pytest -q tests

Fix the bugs in the package so that every test passes. The tests are correct: do not edit, skip or
delete them (the verifier runs its own copies of these tests; a skipped test counts as failed).
{hint}"""
    test_sh = TEST_SH_PRELUDE + _pytest_sh(pkg, "/app/proj", "/tests/hidden") + _GRADE_ONCE
    files = _project_files(pkg, buggy, tests)
    files.update({f"tests/hidden/{n}": t for n, t in tests.items()})
    files.update(
        {
            "tests/test.sh": test_sh,
            "tests/grade.py": grader(_PYTEST_GRADE, FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, UNCHANGED={}),
            "solution/solve.sh": solve,
        }
    )
    if len(fixed) > 1:
        files["solution/wrong.sh"] = wrong
    return TaskDraft(
        name="",
        description="Fix bugs across a small Python package so its pytest suite passes.",
        instruction=instruction,
        files=files,
        required_steps=2 + 2 * len(chosen),
        keywords=("swe",),
        metadata={"n_modules": len(modules), "n_bugs": len(chosen), "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p},
        test_reads=(f"proj/{pkg}",),
        checkpoints=tuple(
            Checkpoint(
                f"tests-{m}-pass",
                f"cd /app/proj && python3 -m pytest -q -p no:cacheprovider tests/test_{m}.py >/dev/null 2>&1",
            )
            for m in sorted(fixed)
        ),
        agent_timeout_sec=900.0,
    )


# ---------------------------------------------------------------------------------------------- feature

_RAISES = "__raises_ValueError__"

_FEATURES: dict[str, tuple[str, str, str]] = {
    "parse_duration": (
        """`parse_duration(text: str) -> int` — parse a duration such as `"1h30m"`, `"45s"` or `"2h5s"` into
  seconds. The text is one or more groups `<digits><unit>` with units `h`, `m`, `s`, each unit at most
  once and in that order (h before m before s). Anything else (empty text, an unknown unit, a missing
  number, spaces, a repeated or out-of-order unit) raises `ValueError`.""",
        """import re

_PART = re.compile(r"(\\d+)([hms])")
_SCALE = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    pos, total, last = 0, 0, -1
    for m in _PART.finditer(text):
        rank = "hms".index(m.group(2))
        if m.start() != pos or rank <= last:
            raise ValueError(f"bad duration: {text!r}")
        total += int(m.group(1)) * _SCALE[m.group(2)]
        pos, last = m.end(), rank
    if pos != len(text) or last < 0:
        raise ValueError(f"bad duration: {text!r}")
    return total
""",
        """import re


def parse_duration(text):
    scale = {"h": 3600, "m": 60, "s": 1}
    return sum(int(n) * scale[u] for n, u in re.findall(r"(\\d+)([hms])", text))
""",
    ),
    "rle": (
        """`rle_encode(text: str) -> str` — run-length encode letters: `"aaabcc"` → `"3a1b2c"` (the empty
  string encodes to `""`). `rle_decode(code: str) -> str` — the inverse; it raises `ValueError` when
  the code is malformed (a letter without a count before it, a trailing count, or a count of 0).""",
        """import re


def rle_encode(text):
    out = []
    for m in re.finditer(r"(.)\\1*", text):
        out.append(f"{len(m.group(0))}{m.group(1)}")
    return "".join(out)


def rle_decode(code):
    pos, out = 0, []
    for m in re.finditer(r"(\\d+)(\\D)", code):
        if m.start() != pos or int(m.group(1)) == 0:
            raise ValueError(f"bad code: {code!r}")
        out.append(m.group(2) * int(m.group(1)))
        pos = m.end()
    if pos != len(code):
        raise ValueError(f"bad code: {code!r}")
    return "".join(out)
""",
        """import re


def rle_encode(text):
    return "".join(f"{len(m.group(0))}{m.group(1)}" for m in re.finditer(r"(.)\\1*", text))


def rle_decode(code):
    return "".join(c * int(n) for n, c in re.findall(r"(\\d+)(\\D)", code))
""",
    ),
    "roman": (
        """`to_roman(n: int) -> str` — the Roman numeral for `1 <= n <= 3999` using subtractive notation
  (`4` → `"IV"`, `1994` → `"MCMXCIV"`); any other `n` raises `ValueError`.""",
        """_VALUES = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
           (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def to_roman(n):
    if not 1 <= n <= 3999:
        raise ValueError(f"out of range: {n}")
    out = []
    for value, numeral in _VALUES:
        count, n = divmod(n, value)
        out.append(numeral * count)
    return "".join(out)
""",
        """def to_roman(n):
    out = []
    for value, numeral in [(1000, "M"), (500, "D"), (100, "C"), (50, "L"), (10, "X"), (5, "V"), (1, "I")]:
        count, n = divmod(n, value)
        out.append(numeral * count)
    return "".join(out)
""",
    ),
    "intervals": (
        """`merge_intervals(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]` — merge overlapping or
  touching closed intervals (`(1, 3)` and `(3, 5)` merge to `(1, 5)`) and return them sorted by start,
  as tuples. An interval whose start is greater than its end raises `ValueError`.""",
        """def merge_intervals(pairs):
    merged = []
    for a, b in sorted(pairs):
        if a > b:
            raise ValueError(f"bad interval: {(a, b)}")
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged
""",
        """def merge_intervals(pairs):
    merged = []
    for a, b in sorted(pairs):
        if merged and a < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged
""",
    ),
}


def _feature_cases(rng: random.Random, feature: str) -> list[tuple[str, str, tuple[Any, ...]]]:
    cases: list[tuple[str, str, tuple[Any, ...]]] = []
    if feature == "parse_duration":
        for i in range(4):
            units = sorted(rng.sample("hms", rng.randint(1, 3)), key="hms".index)
            cases.append(
                (f"valid_{i}", "parse_duration", ("".join(f"{rng.randint(1, 99)}{u}" for u in units),))
            )
        for i, bad in enumerate(["", "5x", "h", "3m2h", "1h 2m", "2s2s", f"{rng.randint(1, 9)}"]):
            cases.append((f"invalid_{i}", "parse_duration", (bad,)))
    elif feature == "rle":
        for i in range(3):
            text = "".join(rng.choice("abc") * rng.randint(1, 4) for _ in range(rng.randint(1, 5)))
            cases.append((f"encode_{i}", "rle_encode", (text,)))
            cases.append(
                (
                    f"decode_{i}",
                    "rle_decode",
                    ("".join(f"{rng.randint(1, 12)}{rng.choice('xyz')}" for _ in range(3)),),
                )
            )
        cases.append(("encode_empty", "rle_encode", ("",)))
        for i, bad in enumerate(["a3", "3", "0a", "2ab"]):
            cases.append((f"decode_invalid_{i}", "rle_decode", (bad,)))
    elif feature == "roman":
        for i, n in enumerate([rng.randint(1, 3999) for _ in range(4)] + [4, 9, 40, 944, 1994, 3999]):
            cases.append((f"value_{i}", "to_roman", (n,)))
        for i, out_of_range in enumerate([0, 4000, -rng.randint(1, 50)]):
            cases.append((f"invalid_{i}", "to_roman", (out_of_range,)))
    else:
        for i in range(4):
            pairs = []
            for _ in range(rng.randint(2, 6)):
                a = rng.randint(0, 30)
                pairs.append((a, a + rng.randint(0, 8)))
            cases.append((f"merge_{i}", "merge_intervals", (pairs,)))
        cases.append(("touching", "merge_intervals", ([(5, 7), (1, 3), (3, 5)],)))
        cases.append(("invalid", "merge_intervals", ([(1, 2), (6, 4)],)))
    return cases


def _feature(rng: random.Random, level: int) -> TaskDraft:
    pkg = rng.choice(_PACKAGES)
    names = {1: 1, 2: 2, 3: 4}[level]
    features = rng.sample(sorted(_FEATURES), names)
    ref_src = "\n\n".join(_FEATURES[f][1] for f in features)
    naive_src = "\n\n".join(_FEATURES[f][2] for f in features)
    ns: dict[str, Any] = {}
    exec(compile(ref_src, "<feature>", "exec"), ns)  # our own reference source, at generation time
    funcs: list[str] = []
    hidden = f"import pytest\n\nfrom {pkg}.extra import "
    body, examples = "", ""
    for f in features:
        for label, func, args in _feature_cases(rng, f):
            if func not in funcs:
                funcs.append(func)
            ok, value = _call(ns, func, args)
            call = f"{func}({', '.join(repr(a) for a in args)})"
            if ok:
                test = f"\n\ndef test_{func}_{label}():\n    assert {call} == {value!r}\n"
            else:
                assert value == "ValueError", (f, args, value)
                test = (
                    f"\n\ndef test_{func}_{label}():\n    with pytest.raises(ValueError):\n        {call}\n"
                )
            body += test
            if label.endswith("_0") and ok:
                examples += test
    hidden += ", ".join(funcs) + "\n" + body
    visible = f"from {pkg}.extra import {', '.join(funcs)}\n" + examples
    stubs = "".join(
        f'\n\ndef {fn}(*args, **kwargs):\n    raise NotImplementedError("see SPEC.md")\n' for fn in funcs
    )
    stub_src = f'"""Functions specified in /app/proj/SPEC.md."""\n{stubs}'
    spec = "# Specification\n\nImplement these functions in `{pkg}/extra.py`:\n\n".replace("{pkg}", pkg)
    spec += "\n".join(f"- {_FEATURES[f][0]}" for f in features) + "\n"
    instruction = f"""# Implement a feature from a spec

`/app/proj` is a Python project (package `{pkg}`). `/app/proj/SPEC.md` specifies {len(funcs)} function(s)
that are stubs in `/app/proj/{pkg}/extra.py`. Implement them exactly as specified, including the errors
they raise. `/app/proj/tests/test_examples.py` holds a few examples; the verifier runs a larger hidden
suite with edge cases. Standard library only.
"""
    test_ids = sorted(
        f"test_extra::{line[4 : line.index('(')]}"
        for line in hidden.splitlines()
        if line.startswith("def test_")
    )
    test_sh = TEST_SH_PRELUDE + _pytest_sh(pkg, "/app/proj", "/tests/hidden") + _GRADE_ONCE
    files = _project_files(pkg, {"extra": stub_src}, {"test_examples.py": visible})
    files.update(
        {
            "environment/files/proj/SPEC.md": spec,
            "tests/hidden/test_extra.py": hidden,
            "tests/test.sh": test_sh,
            "tests/grade.py": grader(_PYTEST_GRADE, FAIL_TO_PASS=test_ids, PASS_TO_PASS=[], UNCHANGED={}),
            "solution/solve.sh": "#!/bin/sh\nset -e\n" + heredoc(f"/app/proj/{pkg}/extra.py", ref_src),
            "solution/wrong.sh": "#!/bin/sh\nset -e\n" + heredoc(f"/app/proj/{pkg}/extra.py", naive_src),
        }
    )
    return TaskDraft(
        name="",
        description="Implement stubbed functions from a written specification, edge cases included.",
        instruction=instruction,
        files=files,
        required_steps=1 + 2 * len(features),
        keywords=("spec",),
        metadata={"features": features, "n_hidden_tests": len(test_ids)},
        test_reads=(f"proj/{pkg}/extra.py",),
        checkpoints=(
            Checkpoint(
                "examples-pass",
                "cd /app/proj && python3 -m pytest -q -p no:cacheprovider tests >/dev/null 2>&1",
            ),
        ),
        agent_timeout_sec=900.0,
    )


# ---------------------------------------------------------------------------------------------- testrepair


def _testrepair(rng: random.Random, level: int) -> TaskDraft:
    pkg = rng.choice(_PACKAGES)
    modules = rng.sample(["textutil", "stats", "money", "dates"], level)
    cases = {m: _UNITS[m].cases(rng) for m in modules}
    good = _namespaces(pkg, modules, {})
    expected = {m: {t: _call(good[m], f, a)[1] for t, f, a in cases[m]} for m in modules}
    broken: dict[str, set[str]] = {m: set() for m in modules}
    mutants: list[tuple[str, tuple[str, str]]] = []
    for m in modules:
        # A break is only worth making where a mutant is caught by that test alone.
        options = []
        for bug in _UNITS[m].bugs:
            bad = _namespaces(pkg, [m], {m: [bug]})[m]
            killed = [t for t, f, a in cases[m] if _call(bad, f, a) != (True, expected[m][t])]
            if len(killed) == 1:
                options.append((killed[0], bug))
        test, bug = rng.choice(sorted(options))
        broken[m].add(test)
        mutants.append((m, bug))
    wrong_values: dict[str, dict[str, Any]] = {}
    for m in modules:
        wv = dict(expected[m])
        for t in broken[m]:
            v = wv[t]
            wv[t] = (
                v + 1
                if isinstance(v, int) and not isinstance(v, bool)
                else not v
                if isinstance(v, bool)
                else v + "x"
                if isinstance(v, str)
                else [*v, 0]
                if isinstance(v, list)
                else v * 2 + 1
            )
        wrong_values[m] = wv
    rename = {}
    if level == 3:
        m0 = modules[0]
        f0 = cases[m0][0][1]
        rename = {m0: {f0: f0 + "_value"}}
    correct_tests = {m: _test_file(pkg, m, cases[m], expected[m]) for m in modules}
    broken_tests = {
        m: _test_file(pkg, m, cases[m], wrong_values[m], import_as=rename.get(m)) for m in modules
    }
    neutered = {m: _test_file(pkg, m, cases[m], expected[m], neutered=frozenset(broken[m])) for m in modules}
    sources = {m: _source(_UNITS[m], pkg, ()) for m in modules}
    unchanged = {f"/app/proj/{pkg}/{m}.py": sha256_hex(s) for m, s in sources.items()}
    all_ids = sorted(f"test_{m}::{t}" for m in modules for t, _, _ in cases[m])
    test_sh = TEST_SH_PRELUDE + "R=0\ncheck() {\n"
    test_sh += "# 1) the repaired tests pass on the pristine package from /tests\n"
    test_sh += _pytest_sh(pkg, "/tests/pristine", "/app/proj/tests")
    test_sh += "python3 -I /tests/grade.py || return 0\n"
    test_sh += "# 2) and they still catch every mutant that only the broken tests caught\n"
    for i in range(len(mutants)):
        test_sh += _pytest_sh(pkg, f"/tests/mutants/{i}", "/app/proj/tests", junit=f"/tmp/mutant-{i}.xml")
        test_sh += f"python3 -I /tests/killed.py /tmp/mutant-{i}.xml || {{ echo 'mutant {i} survived'; "
        test_sh += "return 0; }\n"
    test_sh += "R=1\n}\ncheck\n" + _WRITE_REWARD
    killed_py = grader("""
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
    bad = [tc for tc in root.iter("testcase") if any(c.tag in ("failure", "error") for c in tc)]
except (OSError, ET.ParseError):
    bad = []
check(bad, "the repaired tests pass on a mutant that the original tests caught")
""")
    files = _project_files(pkg, sources, {f"test_{m}.py": t for m, t in broken_tests.items()})
    for m, s in sources.items():
        files[f"tests/pristine/{pkg}/{m}.py"] = s
    files[f"tests/pristine/{pkg}/__init__.py"] = f'"""The {pkg} package."""\n'
    for i, (m, bug) in enumerate(mutants):
        for mm, s in sources.items():
            files[f"tests/mutants/{i}/{pkg}/{mm}.py"] = _source(_UNITS[mm], pkg, [bug]) if mm == m else s
        files[f"tests/mutants/{i}/{pkg}/__init__.py"] = f'"""The {pkg} package."""\n'
    files.update(
        {
            "tests/test.sh": test_sh,
            "tests/grade.py": grader(
                _PYTEST_GRADE, FAIL_TO_PASS=all_ids, PASS_TO_PASS=[], UNCHANGED=unchanged
            ),
            "tests/killed.py": killed_py,
            "solution/solve.sh": "#!/bin/sh\nset -e\n"
            + "".join(heredoc(f"/app/proj/tests/test_{m}.py", t) for m, t in correct_tests.items()),
            "solution/wrong.sh": "#!/bin/sh\nset -e\n"
            + "".join(heredoc(f"/app/proj/tests/test_{m}.py", t) for m, t in neutered.items()),
        }
    )
    instruction = f"""# Repair broken tests

`/app/proj` is a Python project (package `{pkg}`). The package is correct, but some tests in
`/app/proj/tests` are wrong:

    cd /app/proj && python3 -m pytest -q tests

Repair the tests so that they pass. Do not modify the package. Keep every test function (same names),
and keep each one meaningful: a repaired test must still check the behaviour its name describes (the
verifier checks that your tests still catch bugs the original tests were written to catch).
"""
    return TaskDraft(
        name="",
        description="Repair wrong tests without weakening them; the package must stay untouched.",
        instruction=instruction,
        files=files,
        required_steps=2 + sum(len(b) for b in broken.values()) + (1 if rename else 0),
        keywords=("tests",),
        metadata={"n_broken": sum(len(b) for b in broken.values()), "n_mutants": len(mutants)},
        test_reads=("proj/tests", *(f"proj/{pkg}/{m}.py" for m in modules)),
        checkpoints=(
            Checkpoint(
                "tests-pass", "cd /app/proj && python3 -m pytest -q -p no:cacheprovider tests >/dev/null 2>&1"
            ),
        ),
        agent_timeout_sec=900.0,
    )


@register_family
class CodeFamily(TaskFamily):
    name = "code"
    version = 1
    domain = "code"
    description = (
        "Python repositories: multi-file bug fixes (FAIL_TO_PASS), features from a spec, test repair."
    )

    def kinds(self) -> Mapping[str, Generator]:
        return {"bugfix": _bugfix, "feature": _feature, "testrepair": _testrepair}
