"""``longctx``: long documents with facts at controlled depths, and multi-document aggregation.

Following "Lost in the Middle" (Liu et al., 2023), every task records where its decisive fact sits:
``[metadata] depth`` is the character offset of that fact divided by the document length (0.0 = the
start, 1.0 = the end), chosen from :data:`DEPTHS`, so accuracy can be reported by depth. Levels make
the input longer, add near-miss distractors, and add hops or documents. Filler text is generated
from templates that never use the words the questions ask about, so the answer is not ambiguous.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from ridgeline.tasks.suites.base import (
    GRADE_TEST_SH,
    WORDS,
    Generator,
    TaskDraft,
    TaskFamily,
    grader,
    heredoc,
    register_family,
)

DEPTHS: tuple[float, ...] = (0.0, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0)

_FIRST = [
    "Ada",
    "Bela",
    "Cyrus",
    "Dana",
    "Emil",
    "Freya",
    "Gus",
    "Hana",
    "Ivo",
    "Jun",
    "Kira",
    "Lev",
    "Mira",
    "Nils",
    "Oona",
    "Pavel",
    "Rosa",
    "Soren",
    "Tove",
    "Uri",
]
_LAST = [
    "Aalto",
    "Brandt",
    "Castro",
    "Diallo",
    "Eriksen",
    "Fontaine",
    "Gallo",
    "Haas",
    "Ito",
    "Jansen",
    "Kowal",
    "Lund",
    "Moreau",
    "Novak",
    "Ortiz",
]
_CITIES = [
    "Arden",
    "Bristow",
    "Calder",
    "Dunmore",
    "Elston",
    "Farrow",
    "Glenby",
    "Halden",
    "Irvine",
    "Jarrow",
    "Kelso",
    "Lanark",
    "Morven",
]
_REGIONS = ("North", "South", "East", "West")
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]

_TEMPLATES = (
    "The {w} committee met on a {day} to review the {w2} schedule and agreed to revisit it later.",
    "{name} circulated notes about the {w} workshop, highlighting the {w2} discussion.",
    "Attendance at the {w} session was steady, and the {w2} handouts were reprinted twice.",
    "A brief delay affected the {w} shuttle, although the {w2} route remained open.",
    "Facilities staff replaced the {w} signage near the {w2} entrance during the {day} shift.",
    "{name} suggested renaming the {w} corridor after the {w2} garden, which drew mixed reactions.",
    "The newsletter featured the {w} mural and a short interview about the {w2} archive.",
    "Volunteers sorted the {w} donations and labelled each crate with a {w2} sticker.",
    "Minutes from the {day} meeting mention the {w} heater and the {w2} window latch.",
    "{name} thanked the {w} group for organising the {w2} picnic despite the weather.",
)
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


def _person(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"


def _filler(rng: random.Random, n_chars: int) -> list[str]:
    """Paragraphs of neutral prose totalling about ``n_chars`` characters."""
    paragraphs, total = [], 0
    while total < n_chars:
        sentences = [
            rng.choice(_TEMPLATES).format(
                w=rng.choice(WORDS), w2=rng.choice(WORDS), day=rng.choice(_DAYS), name=_person(rng)
            )
            for _ in range(rng.randint(3, 7))
        ]
        p = " ".join(sentences)
        paragraphs.append(p)
        total += len(p) + 2
    return paragraphs


def _place(paragraphs: list[str], facts: list[tuple[float, str]]) -> tuple[str, list[float]]:
    """Insert each ``(depth, sentence)`` as its own paragraph; return the text and actual depths."""
    slots: dict[int, list[str]] = {}
    for depth, sentence in facts:
        slots.setdefault(round(depth * len(paragraphs)), []).append(sentence)
    out: list[str] = []
    for i in range(len(paragraphs) + 1):
        out.extend(slots.get(i, []))
        if i < len(paragraphs):
            out.append(paragraphs[i])
    text = "\n\n".join(out) + "\n"
    actual = [round(text.index(s) / max(1, len(text) - len(s) - 1), 3) for _, s in facts]
    return text, actual


_EXACT_BODY = """
answer = read_answer().strip().strip("`'\\".").strip()
check(answer.lower() == EXPECTED.lower(), "the answer does not match the expected value")
"""

_INT_BODY = """
answer = read_answer()
got = parse_number(answer)
check(got is not None and got == EXPECTED, "the answer is not the expected integer")
"""


def _code(rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    return f"{rng.choice(letters)}{rng.choice(letters)}-{rng.randrange(1000, 10000)}-{rng.choice(letters)}"


# ---------------------------------------------------------------------------------------------- needle


_NEEDLE_NOTE = "The code may have been changed during the period the minutes cover; give the latest one."


def _needle(rng: random.Random, level: int) -> TaskDraft:
    size, n_decoys = {1: (30_000, 0), 2: (120_000, 6), 3: (400_000, 20)}[level]
    projects = rng.sample(WORDS, n_decoys + 1)
    target = projects[0].capitalize()
    depth = rng.choice(DEPTHS)
    code = _code(rng)
    facts: list[tuple[float, str]] = []
    if level == 3:
        old = _code(rng)
        early = rng.uniform(0.0, depth) if depth > 0 else 0.0
        facts.append((early, f"The access code for project {target} was set to {old}."))
        facts.append(
            (
                depth,
                f"Update: the access code for project {target} has been changed to {code}; "
                "the previous code no longer works.",
            )
        )
    else:
        facts.append((depth, f"The access code for project {target} is {code}."))
    for p in projects[1:]:
        facts.append((rng.random(), f"The access code for project {p.capitalize()} is {_code(rng)}."))
    text, actual = _place(_filler(rng, size), facts)
    decisive = actual[1] if level == 3 else actual[0]
    question = f"What is the current access code for project {target}?"
    instruction = f"""# Find a fact in a long document

`/app/docs/minutes.txt` is a long set of meeting minutes. {question}
{_NEEDLE_NOTE if level == 3 else ""}
Answer with the code only (for example `AB-1234-C`).
"""
    solve = "#!/bin/sh\nset -e\n"
    if level == 3:
        solve += (
            f"grep -o 'access code for project {target} has been changed to [A-Z0-9-]*' "
            "/app/docs/minutes.txt "
            "| tail -n 1 | awk '{print $NF}' > /logs/agent/answer.txt\n"
        )
        wrong: str | None = (
            f"grep -o 'access code for project {target} was set to [A-Z0-9-]*' "
            "/app/docs/minutes.txt | head -n 1 | awk '{print $NF}' | tr -d . > /logs/agent/answer.txt\n"
        )
    else:
        solve += (
            f"grep -o 'access code for project {target} is [A-Z0-9-]*' /app/docs/minutes.txt "
            "| awk '{print $NF}' > /logs/agent/answer.txt\n"
        )
        wrong = None
    files: dict[str, str | bytes] = {
        "environment/files/docs/minutes.txt": text,
        "tests/test.sh": GRADE_TEST_SH,
        "tests/grade.py": grader(_EXACT_BODY, EXPECTED=code),
        "solution/solve.sh": solve,
    }
    if wrong:
        files["solution/wrong.sh"] = "#!/bin/sh\nset -e\n" + wrong
    return TaskDraft(
        name="",
        description="Retrieve one fact placed at a controlled depth of a long document.",
        instruction=instruction,
        files=files,
        answer=True,
        required_steps=level,
        metadata={"depth": depth, "depth_actual": decisive, "n_chars": len(text), "n_distractors": n_decoys},
        test_reads=(),
    )


# ---------------------------------------------------------------------------------------------- chain


def _chain(rng: random.Random, level: int) -> TaskDraft:
    size, hops = {1: (40_000, 2), 2: (150_000, 3), 3: (400_000, 4)}[level]
    project = rng.choice(WORDS).capitalize()
    people = list(dict.fromkeys(_person(rng) for _ in range(12)))
    lead, deputy = people[0], people[1]
    team = f"{rng.choice(WORDS).capitalize()} Group"
    room = f"{rng.randint(1, 9)}{rng.randrange(100):02d}"
    building = rng.choice(_CITIES) + " Hall"
    links = [f"Project {project} is led by {lead}."]
    if hops >= 3:
        links.append(f"{lead} belongs to the {team}.")
        links.append(f"The {team} works out of room {room}.")
    else:
        links.append(f"{lead} has an office in room {room}.")
    if hops >= 4:
        links.append(f"Room {room} is located in {building}.")
    other = rng.choice([w for w in WORDS if w.capitalize() != project]).capitalize()
    distractors = [
        f"Project {other} is led by {deputy}.",
        f"{deputy} has an office in room {rng.randint(1, 9)}{rng.randrange(100):02d}.",
    ]
    for p in people[2 : 2 + 2 * level]:
        distractors.append(f"{p} has an office in room {rng.randint(1, 9)}{rng.randrange(100):02d}.")
    depths = [rng.choice(DEPTHS) for _ in links]
    facts = list(zip(depths, links, strict=True)) + [(rng.random(), d) for d in distractors]
    text, actual = _place(_filler(rng, size), facts)
    if hops >= 4:
        question, expected = (
            f"In which building is the office of the person who leads project {project}?",
            building,
        )
    else:
        question, expected = f"In which room does the lead of project {project} work?", room
    what = "the building name (for example `Calder Hall`)" if hops >= 4 else "the room number only"
    instruction = f"""# Connect facts across a long document

`/app/docs/handbook.txt` is a long staff handbook. {question} The answer needs {hops} facts that are
stated in different places. Answer with {what}.
"""
    script = f"""import re
text = open("/app/docs/handbook.txt").read()
lead = re.search(r"Project {project} is led by ([A-Z][a-z]+ [A-Z][a-z]+)\\.", text).group(1)
if {hops} >= 3:
    team = re.search(re.escape(lead) + r" belongs to the ([A-Za-z]+ Group)\\.", text).group(1)
    room = re.search(r"The " + re.escape(team) + r" works out of room (\\d+)\\.", text).group(1)
else:
    room = re.search(re.escape(lead) + r" has an office in room (\\d+)\\.", text).group(1)
answer = room
if {hops} >= 4:
    answer = re.search(r"Room " + room + r" is located in ([A-Za-z]+ Hall)\\.", text).group(1)
open("/logs/agent/answer.txt", "w").write(answer + "\\n")
"""
    solve = "#!/bin/sh\nset -e\n" + heredoc("/tmp/solve.py", script) + "python3 /tmp/solve.py\n"
    return TaskDraft(
        name="",
        description="Chain several facts scattered through a long document to answer one question.",
        instruction=instruction,
        files={
            "environment/files/docs/handbook.txt": text,
            "tests/test.sh": GRADE_TEST_SH,
            "tests/grade.py": grader(_EXACT_BODY, EXPECTED=expected),
            "solution/solve.sh": solve,
        },
        answer=True,
        required_steps=hops,
        metadata={
            "depth": depths[-1],
            "depths": depths,
            "depths_actual": actual[: len(links)],
            "hops": hops,
            "n_chars": len(text),
        },
        test_reads=(),
    )


# ---------------------------------------------------------------------------------------------- aggregate


_CORRECTION_NOTE = (
    "Some reports end with corrections that replace an earlier figure; use the corrected figure."
)


def _aggregate(rng: random.Random, level: int) -> TaskDraft:
    n_docs, size = {1: (4, 6_000), 2: (12, 10_000), 3: (40, 12_000)}[level]
    region = rng.choice(_REGIONS)
    quarter = rng.randint(1, 4)
    months = _MONTHS[3 * (quarter - 1) : 3 * quarter]
    cities = rng.sample([f"{c}{'' if i < len(_CITIES) else i}" for i, c in enumerate(_CITIES * 4)], n_docs)
    total = 0
    files: dict[str, str | bytes] = {}
    regions = [region if i % 2 == 0 else rng.choice(_REGIONS) for i in range(n_docs)]
    for i, (city, reg) in enumerate(zip(cities, regions, strict=True)):
        facts: list[tuple[float, str]] = []
        doc_months = [rng.choice(months)] if level == 1 else rng.sample(_MONTHS, rng.randint(3, 6))
        for m in doc_months:
            units = rng.randint(50, 2000)
            facts.append((rng.random(), f"In {m}, the {city} branch sold {units} units."))
            facts.append(
                (
                    rng.random(),
                    f"In {m}, the {city} branch had {rng.randint(1, 40)} units returned "
                    f"and forecast {rng.randint(50, 2000)} units for the next month.",
                )
            )
            if level == 3 and rng.random() < 0.3:
                fixed = rng.randint(50, 2000)
                facts.append(
                    (
                        1.0,
                        f"Correction: the {m} sales figure for {city} was {fixed} units, "
                        "replacing the number reported above.",
                    )
                )
                units = fixed
            if reg == region and m in months:
                total += units
        body, _ = _place(_filler(rng, size), facts)
        files[f"environment/files/docs/branch-{i:03d}.md"] = (
            f"# {city} branch report\n\nRegion: {reg}\n\n{body}"
        )
    quarter_text = ", ".join(months)
    instruction = f"""# Aggregate figures across documents

`/app/docs/` holds {n_docs} branch reports. Each names its region near the top and states monthly
sales as sentences like "In March, the X branch sold 120 units."
{_CORRECTION_NOTE if level == 3 else ""}
How many units in total did the branches in the **{region}** region sell in Q{quarter} ({quarter_text})?
Count only units sold (not returned or forecast). Answer with the integer only.
"""
    script = f"""import glob, re
months = {months!r}
total = 0
for path in sorted(glob.glob("/app/docs/*.md")):
    text = open(path).read()
    if re.search(r"^Region: (\\w+)$", text, re.M).group(1) != {region!r}:
        continue
    sold = {{}}
    for m, n in re.findall(r"In (\\w+), the \\w+ branch sold (\\d+) units\\.", text):
        sold[m] = int(n)
    for m, n in re.findall(r"Correction: the (\\w+) sales figure for \\w+ was (\\d+) units", text):
        sold[m] = int(n)
    total += sum(n for m, n in sold.items() if m in months)
open("/logs/agent/answer.txt", "w").write(f"{{total}}\\n")
"""
    solve = "#!/bin/sh\nset -e\n" + heredoc("/tmp/solve.py", script) + "python3 /tmp/solve.py\n"
    files.update(
        {
            "tests/test.sh": GRADE_TEST_SH,
            "tests/grade.py": grader(_INT_BODY, EXPECTED=total),
            "solution/solve.sh": solve,
        }
    )
    if level >= 2:
        # Forgets the region filter (level 2) or the corrections (level 3).
        files["solution/wrong.sh"] = (
            solve.replace(
                '    for m, n in re.findall(r"Correction', '    for m, n in [] and re.findall(r"Correction'
            )
            if level == 3
            else solve.replace(f"!= {region!r}", "== 'Nowhere'")
        )
    return TaskDraft(
        name="",
        description="Sum figures stated in prose across many documents, with filters and corrections.",
        instruction=instruction,
        files=files,
        answer=True,
        required_steps={1: 2, 2: 4, 3: 6}[level],
        metadata={"n_docs": n_docs, "region": region, "quarter": quarter},
        test_reads=(),
    )


@register_family
class LongContextFamily(TaskFamily):
    name = "longctx"
    version = 1
    domain = "longctx"
    description = "Long documents: facts at controlled depths, multi-hop chains, multi-document sums."

    def kinds(self) -> Mapping[str, Generator]:
        return {"needle": _needle, "chain": _chain, "aggregate": _aggregate}
