"""``terminal``: file and text operations, archives, permissions, log analysis and processes.

Every task is solved with the shell tools of the default image (coreutils, grep, sed, awk, find,
tar, gzip, xz, unzip, python3). Levels add files, nesting and rules, so harder tasks need more
commands, not just longer answers.
"""

from __future__ import annotations

import gzip
import io
import lzma
import random
import tarfile
import zipfile
from collections import Counter
from collections.abc import Mapping

from ridgeline.tasks.suites.base import (
    GRADE_TEST_SH,
    WORDS,
    Checkpoint,
    Generator,
    TaskDraft,
    TaskFamily,
    dumps_json,
    grader,
    heredoc,
    register_family,
    sha256_hex,
)

# ---------------------------------------------------------------------------------------------- search


def _lines(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def _search(rng: random.Random, level: int) -> TaskDraft:
    n_files, depth = {1: (8, 1), 2: (30, 2), 3: (70, 3)}[level]
    key = f"KEY-{rng.randrange(16**6):06x}"
    decoys: set[str] = set()
    while len(decoys) < 3:
        d = f"KEY-{rng.randrange(16**6):06x}"
        if d != key:
            decoys.add(d)
    dirs = [""]
    for _ in range(depth * 3):
        parent = rng.choice(dirs)
        if parent.count("/") < depth:
            dirs.append(f"{parent}{rng.choice(WORDS)}{len(dirs)}/")
    if level == 3:
        dirs += [f"{rng.choice(dirs[1:])}archive/", "archive/"]
    files: dict[str, str | bytes] = {}
    matches: list[str] = []
    count = 0
    for i in range(n_files):
        folder = "" if i == 0 else "archive/" if (level == 3 and i == 1) else rng.choice(dirs)
        rel = f"{folder}{rng.choice(WORDS)}-{i:02d}.txt"
        body = _lines(rng, rng.randint(4, 12))
        hits = 0
        if i % 3 == 0 or i == 1 or (level == 3 and "archive/" in rel and i % 2 == 0):
            for _ in range(rng.randint(1, 3)):
                j = rng.randrange(len(body))
                body[j] = f"{body[j]} {key} {rng.choice(WORDS)}"
                hits += 1
        if rng.random() < 0.4:
            body.append(f"see {rng.choice(sorted(decoys))} for details")
        text = "\n".join(body) + "\n"
        files[rel] = text
        if hits and "archive/" not in rel:
            matches.append(rel)
            count += sum(1 for line in body if key in line)
    matches.sort()
    exclude = " --exclude-dir=archive" if level == 3 else ""
    rules = [
        f"List every file under `/app/data` (at any depth) whose text contains the exact string "
        f"`{key}` in `/app/out/matches.txt`: one path per line, relative to `/app/data` (no leading "
        "`./`), sorted in byte order (`LC_ALL=C sort`).",
        "Copy each of those files to `/app/out/matched/`, keeping its relative path "
        "(`/app/data/a/b.txt` → `/app/out/matched/a/b.txt`). Copy nothing else there.",
    ]
    if level >= 2:
        rules.append(
            f"Write to `/app/out/count.txt` the total number of lines containing `{key}` in the listed "
            "files, as a bare integer."
        )
    if level == 3:
        rules.append(
            "Ignore every file below a directory named `archive` (at any depth): it must not be listed, "
            "copied or counted."
        )
    instruction = "# Find and collect marked files\n\n" + "\n".join(
        f"{i}. {r}" for i, r in enumerate(rules, 1)
    )
    instruction += "\n\nLeave `/app/data` unchanged.\n"
    solve = f"""#!/bin/sh
set -e
mkdir -p /app/out/matched
cd /app/data
grep -rlF '{key}'{exclude} . | sed 's|^\\./||' | LC_ALL=C sort > /app/out/matches.txt
while IFS= read -r f; do
  mkdir -p "/app/out/matched/$(dirname "$f")"
  cp "$f" "/app/out/matched/$f"
done < /app/out/matches.txt
"""
    if level >= 2:
        solve += (
            f"cat /app/out/matches.txt | xargs grep -hF '{key}' | wc -l | tr -d ' ' > /app/out/count.txt\n"
        )
    wrong = solve.replace(exclude, "") if level == 3 else None
    grade_body = """
import hashlib
listed = read_text("/app/out/matches.txt")
if listed is not None:
    n = len(listed.split())
    check(listed.split() == MATCHES, f"matches.txt lists {n} paths, expected {len(MATCHES)}")
seen = []
for root, dirs, names in os.walk("/app/out/matched"):
    for n in names:
        seen.append(os.path.relpath(os.path.join(root, n), "/app/out/matched"))
check(sorted(seen) == MATCHES, f"/app/out/matched holds {len(seen)} files, expected {len(MATCHES)}")
for rel in MATCHES:
    try:
        with open(os.path.join("/app/out/matched", rel), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError:
        digest = None
    check(digest == HASHES[rel], f"matched/{rel} missing or changed")
if COUNT is not None:
    got = read_text("/app/out/count.txt")
    check(got is not None and got.strip() == str(COUNT), "count.txt is wrong")
"""
    out = {
        "tests/test.sh": GRADE_TEST_SH,
        "tests/grade.py": grader(
            grade_body,
            MATCHES=matches,
            HASHES={m: sha256_hex(files[m]) for m in matches},
            COUNT=count if level >= 2 else None,
        ),
        "solution/solve.sh": solve,
        **{f"environment/files/data/{k}": v for k, v in files.items()},
    }
    if wrong:
        out["solution/wrong.sh"] = wrong
    return TaskDraft(
        name="",
        description="Find files containing a marker, list and copy them.",
        instruction=instruction,
        files=out,
        required_steps=len(rules) + 1,
        metadata={"n_files": n_files},
        test_reads=("out/matches.txt", "out/matched", "out/count.txt")
        if level >= 2
        else ("out/matches.txt", "out/matched"),
        checkpoints=(
            Checkpoint("listed", "test -s /app/out/matches.txt"),
            Checkpoint("copied", 'test -n "$(find /app/out/matched -type f 2>/dev/null | head -n 1)"'),
        ),
    )


# ---------------------------------------------------------------------------------------------- archive


def _tar(members: Mapping[str, bytes], compress: str) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tf:
        dirs = sorted({"/".join(p.split("/")[:i]) for p in members for i in range(1, p.count("/") + 1)})
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tf.addfile(info)
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(members[name]), 0o644, 0
            tf.addfile(info, io.BytesIO(members[name]))
    data = raw.getvalue()
    if compress == "gz":
        buf = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
            gz.write(data)
        return buf.getvalue()
    return lzma.compress(data, format=lzma.FORMAT_XZ)


def _zip(members: Mapping[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, members[name])
    return buf.getvalue()


def _some_files(rng: random.Random, n: int, prefix: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for i in range(n):
        ext = "csv" if i == 0 else rng.choice(["csv", "csv", "txt", "log"])
        if ext == "csv":
            rows = ["id,name,qty"] + [
                f"{j},{rng.choice(WORDS)},{rng.randint(1, 99)}" for j in range(rng.randint(2, 8))
            ]
            text = "\n".join(rows) + "\n"
        else:
            text = "\n".join(_lines(rng, rng.randint(2, 6))) + "\n"
        out[f"{prefix}{rng.choice(WORDS)}-{i:02d}.{ext}"] = text.encode()
    return out


def _archive(rng: random.Random, level: int) -> TaskDraft:
    n = {1: 6, 2: 12, 3: 20}[level]
    final = _some_files(rng, n, "bundle/")
    outer = dict(final)
    steps = ["mkdir -p /app/extracted /app/out", "tar -xzf /app/incoming/bundle.tar.gz -C /app/extracted"]
    nested = ""
    if level >= 2:
        more = _some_files(rng, n // 2, "bundle/more/")
        final.update(more)
        zip_members = {k[len("bundle/more/") :]: v for k, v in more.items()}
        if level == 3:
            deep = _some_files(rng, n // 2, "bundle/more/deep/")
            final.update(deep)
            zip_members["deep.tar.xz"] = _tar(
                {k[len("bundle/more/deep/") :]: v for k, v in deep.items()}, "xz"
            )
        outer["bundle/more.zip"] = _zip(zip_members)
        steps += ["cd /app/extracted/bundle", "unzip -q more.zip -d more", "rm more.zip"]
        if level == 3:
            steps += ["mkdir -p more/deep", "tar -xJf more/deep.tar.xz -C more/deep", "rm more/deep.tar.xz"]
        nested = (
            "\nThe bundle contains nested archives. Extract every nested archive `NAME.zip`, "
            "`NAME.tar.xz` or `NAME.tar.gz` into a directory `NAME/` next to it, then delete the "
            "archive file; repeat until no archive is left.\n"
        )
    paths = sorted(final)
    manifest = "".join(f"{sha256_hex(final[p])}  {p}\n" for p in paths)
    csvs = [p for p in paths if p.endswith(".csv")]
    steps += [
        "cd /app/extracted",
        "find . -type f | sed 's|^\\./||' | LC_ALL=C sort > /tmp/files",
        'while IFS= read -r f; do sha256sum "$f"; done < /tmp/files > /app/out/manifest.sha256',
        "grep '\\.csv$' /tmp/files > /tmp/csvs",
        "tar -czf /app/out/csv-only.tar.gz -T /tmp/csvs",
    ]
    solve = "#!/bin/sh\nset -e\n" + "\n".join(steps) + "\n"
    wrong = None
    if level >= 2:
        wrong = "#!/bin/sh\nset -e\n" + "\n".join(s for s in steps if "more" not in s) + "\n"
    instruction = f"""# Unpack and index an archive

`/app/incoming/bundle.tar.gz` holds a delivery of files.

1. Extract it into `/app/extracted` (so its files end up under `/app/extracted/bundle/`).{nested}
2. Write `/app/out/manifest.sha256` in `sha256sum` format (`<hex digest>  <path>`) with one line per
   regular file under `/app/extracted`, paths relative to `/app/extracted` (no leading `./`), sorted
   by path in byte order.
3. Create `/app/out/csv-only.tar.gz`, a gzip-compressed tar archive holding exactly the `.csv` files
   under `/app/extracted`, stored under the same relative paths (for example `bundle/x.csv`).
"""
    body = """
import tarfile
got = read_text("/app/out/manifest.sha256")
if got is not None:
    ok = got.strip().splitlines() == MANIFEST.strip().splitlines()
    check(ok, "manifest.sha256 differs from the expected manifest")
found = []
for root, dirs, names in os.walk("/app/extracted"):
    for n in names:
        found.append(os.path.relpath(os.path.join(root, n), "/app/extracted"))
check(sorted(found) == sorted(line.split("  ", 1)[1] for line in MANIFEST.splitlines()),
      f"/app/extracted holds {len(found)} files (nested archives left or files missing)")
try:
    with tarfile.open("/app/out/csv-only.tar.gz", "r:gz") as tf:
        members = {}
        for m in tf.getmembers():
            if m.isfile():
                members[os.path.normpath(m.name)] = tf.extractfile(m).read()
    n = len(members)
    check(sorted(members) == CSVS, f"csv-only.tar.gz holds {n} files, expected {len(CSVS)} csv files")
    import hashlib
    digests = {line.split("  ", 1)[1]: line.split("  ", 1)[0] for line in MANIFEST.splitlines()}
    for name, data in members.items():
        ok = digests.get(name) == hashlib.sha256(data).hexdigest()
        check(ok, f"{name} in csv-only.tar.gz has wrong content")
except (OSError, tarfile.TarError, EOFError) as exc:
    check(False, f"csv-only.tar.gz is not a readable tar.gz: {exc}")
"""
    out: dict[str, str | bytes] = {
        "environment/files/incoming/bundle.tar.gz": _tar(outer, "gz"),
        "tests/test.sh": GRADE_TEST_SH,
        "tests/grade.py": grader(body, MANIFEST=manifest, CSVS=csvs),
        "solution/solve.sh": solve,
    }
    if wrong:
        out["solution/wrong.sh"] = wrong
    return TaskDraft(
        name="",
        description="Extract nested archives, write a checksum manifest, repack a subset.",
        instruction=instruction,
        files=out,
        required_steps=3 + 2 * (level - 1),
        metadata={"n_files": len(final)},
        test_reads=("extracted", "out/manifest.sha256", "out/csv-only.tar.gz"),
        checkpoints=(
            Checkpoint("extracted", "test -d /app/extracted/bundle"),
            Checkpoint("manifest", "test -s /app/out/manifest.sha256"),
        ),
    )


# ---------------------------------------------------------------------------------------------- perms


def _perms(rng: random.Random, level: int) -> TaskDraft:
    n = {1: 2, 2: 4, 3: 6}[level]
    files: dict[str, str | bytes] = {}
    for i in range(n):
        files[f"bin/{rng.choice(WORDS)}-{i}.sh"] = f"#!/bin/sh\necho {rng.choice(WORDS)}\n"
        files[f"private/{rng.choice(WORDS)}-{i}.key"] = f"{rng.randrange(16**32):032x}\n"
        files[f"public/{rng.choice(WORDS)}-{i}.html"] = f"<p>{rng.choice(WORDS)}</p>\n"
    if level >= 2:
        files[f"conf/{rng.choice(WORDS)}.conf"] = f"mode={rng.choice(WORDS)}\n"
    backups: list[str] = []
    if level >= 2:
        for i in range(n // 2 + 1):
            src = rng.choice(sorted(files))
            bak = src + ("~" if i % 2 else ".bak")
            if bak not in files:
                backups.append(bak)
        for b in backups:
            files[b] = "stale copy\n"
    overrides: dict[str, str] = {}
    if level == 3:
        candidates = sorted(k for k in files if k not in backups and not k.startswith("private/"))
        for p in rng.sample(candidates, 3):
            overrides[p] = rng.choice(["0640", "0750", "0600"])
    expected: dict[str, str] = {}
    for p in sorted(files):
        if p in backups:
            continue
        if p.startswith("private/"):
            mode = "0600"
        elif p.startswith("bin/") and p.endswith(".sh"):
            mode = "0755"
        else:
            mode = "0644"
        expected[p] = overrides.get(p, mode)
    dirs = sorted({p.split("/")[0] for p in files})
    dir_modes = {d: ("0700" if d == "private" else "0755") for d in dirs}
    setup = "#!/bin/sh\n# Put the files into a messy state (the agent fixes it).\nset -e\ncd /app/site\n"
    for p in sorted(files):
        setup += f"chmod {rng.choice(['0666', '0600', '0777', '0644', '0640'])} '{p}'\n"
    for d in dirs:
        setup += f"chmod 0777 '{d}'\n"
    for p in (p for p in sorted(files) if p.startswith("bin/") and p.endswith(".sh")):
        setup += f"chmod 0644 '{p}'\n"
    rules = [
        "Every `*.sh` file in `/app/site/bin` has mode `0755`.",
        "The directory `/app/site/private` has mode `0700` and every file in it mode `0600`.",
        "Every other file has mode `0644`, every other directory (including `/app/site`) `0755`.",
    ]
    if level >= 2:
        rules.append("Delete every backup file below `/app/site`: names ending in `~` or `.bak`.")
    if level == 3:
        rules.append(
            "Finally apply the overrides listed in `/app/site/MODES` (lines `PATH MODE`, paths "
            "relative to `/app/site`); `MODES` itself is mode `0644`."
        )
        files["MODES"] = "".join(f"{p} {m}\n" for p, m in sorted(overrides.items()))
        expected["MODES"] = "0644"
    instruction = "# Fix file permissions\n\nMake the tree under `/app/site` satisfy these rules:\n\n"
    instruction += "\n".join(f"{i}. {r}" for i, r in enumerate(rules, 1))
    instruction += "\n\nDo not change any file's contents, and do not add files.\n"
    solve = "#!/bin/sh\nset -e\ncd /app/site\n"
    if level >= 2:
        solve += "find . \\( -name '*~' -o -name '*.bak' \\) -type f -delete\n"
    solve += "find . -type d -exec chmod 0755 {} +\nfind . -type f -exec chmod 0644 {} +\n"
    solve += "chmod 0755 bin/*.sh\nchmod 0700 private\nchmod 0600 private/*\n"
    if level == 3:
        solve += 'while read -r p m; do chmod "$m" "$p"; done < MODES\n'
    wrong = "#!/bin/sh\nset -e\ncd /app/site\nchmod -R u+rwX,go+rX,go-w .\nchmod 0755 bin/*.sh\n"
    body = """
import hashlib
import stat
root = "/app/site"
for d, want in DIRS.items():
    try:
        got = oct(stat.S_IMODE(os.stat(os.path.join(root, d)).st_mode))[2:].zfill(4)
    except OSError:
        got = None
    check(got == want, f"directory {d}: mode {got}, expected {want}")
try:
    got = oct(stat.S_IMODE(os.stat(root).st_mode))[2:].zfill(4)
except OSError:
    got = None
check(got == "0755", f"/app/site: mode {got}, expected 0755")
present = []
for r, ds, ns in os.walk(root):
    for n in ns:
        present.append(os.path.relpath(os.path.join(r, n), root))
check(sorted(present) == sorted(MODES), f"files present differ from expected (extra or missing): "
      f"{sorted(set(present) ^ set(MODES))[:5]}")
for rel, want in MODES.items():
    path = os.path.join(root, rel)
    try:
        st = os.lstat(path)
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError:
        check(False, f"{rel} is missing")
        continue
    check(stat.S_ISREG(st.st_mode), f"{rel} is not a regular file")
    got = oct(stat.S_IMODE(st.st_mode))[2:].zfill(4)
    check(got == want, f"{rel}: mode {got}, expected {want}")
    check(digest == HASHES[rel], f"{rel}: contents changed")
"""
    return TaskDraft(
        name="",
        description="Repair file modes in a web tree following stated rules.",
        instruction=instruction,
        files={
            **{f"environment/files/site/{k}": v for k, v in files.items()},
            "environment/setup.sh": setup,
            "tests/test.sh": GRADE_TEST_SH,
            "tests/grade.py": grader(
                body, MODES=expected, DIRS=dir_modes, HASHES={p: sha256_hex(files[p]) for p in expected}
            ),
            "solution/solve.sh": solve,
            "solution/wrong.sh": wrong,
        },
        required_steps=len(rules) + 1,
        metadata={"n_files": len(files)},
        test_reads=("site",),
        checkpoints=(
            Checkpoint("scripts-executable", 'test -x "$(ls /app/site/bin/*.sh | head -n 1)"'),
            Checkpoint("private-locked", 'test "$(stat -c %a /app/site/private)" = 700'),
        ),
    )


# ---------------------------------------------------------------------------------------------- logs

_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

_LOG_SOLVER = r"""import glob, gzip, json, re, sys
from collections import Counter
LEVEL = int(sys.argv[1])
pat = re.compile(r'^(\S+) - - \[(\d\d)/(\w{3})/(\d{4}):(\d\d):\d\d:\d\d \+0000\] '
                 r'"(\S+) (\S+) HTTP/1\.1" (\d{3}) (\d+)$')
months = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
rows = []
for path in sorted(glob.glob("/app/logs/access.log*")):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for line in f:
            m = pat.match(line.rstrip("\n"))
            if m:
                rows.append(m.groups())
paths = Counter(r[6] for r in rows)
top = sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
report = {"requests": len(rows), "status_5xx": sum(1 for r in rows if r[7].startswith("5")),
          "unique_ips": len({r[0] for r in rows}), "top_paths": [[p, c] for p, c in top]}
if LEVEL >= 2:
    by = Counter()
    for r in rows:
        by[r[5]] += int(r[8])
    report["bytes_by_method"] = dict(sorted(by.items()))
if LEVEL >= 3:
    hours = Counter(f"{r[3]}-{months.index(r[2]) + 1:02d}-{r[1]}T{r[4]}" for r in rows)
    report["busiest_hour"] = sorted(hours.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
with open("/app/out/report.json", "w") as f:
    json.dump(report, f, indent=2, sort_keys=True)
"""


def _logs(rng: random.Random, level: int) -> TaskDraft:
    plan = {
        1: [("access.log", 300)],
        2: [("access.log", 700), ("access.log.1", 800)],
        3: [
            ("access.log", 1500),
            ("access.log.1", 1500),
            ("access.log.2.gz", 1500),
            ("access.log.3.gz", 1500),
        ],
    }[level]
    ips = [f"10.{rng.randint(0, 9)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}" for _ in range(12 * level)]
    paths = ["/", "/login", "/api/items", "/api/orders", "/static/app.js", "/health", "/search", "/cart"]
    weights = [rng.randint(1, 20) for _ in paths]
    statuses = ["200"] * 14 + ["301", "404", "404", "403", "500", "502", "503"]
    files: dict[str, bytes] = {}
    rows: list[tuple[str, str, str, str, str, str, str]] = []
    t = 0
    for name, count in reversed(plan):  # the oldest file holds the oldest lines
        lines = []
        for _ in range(count):
            t += rng.randint(1, 40)
            day, rem = divmod(t, 86400)
            hh, rem = divmod(rem, 3600)
            mm, ss = divmod(rem, 60)
            ip, method = rng.choice(ips), rng.choice(["GET"] * 6 + ["POST", "PUT", "DELETE"])
            path, status = rng.choices(paths, weights)[0], rng.choice(statuses)
            size = str(rng.randint(0, 50000))
            lines.append(
                f"{ip} - - [{1 + day:02d}/Mar/2024:{hh:02d}:{mm:02d}:{ss:02d} +0000] "
                f'"{method} {path} HTTP/1.1" {status} {size}'
            )
            rows.append((ip, f"2024-03-{1 + day:02d}T{hh:02d}", method, path, status, size, name))
            if level == 3 and rng.random() < 0.01:
                lines.append(rng.choice(["-- log rotated --", "garbage line", '10.0.0.1 - - [bad] "GET /"']))
        data = ("\n".join(lines) + "\n").encode()
        if name.endswith(".gz"):
            buf = io.BytesIO()
            with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
                gz.write(data)
            data = buf.getvalue()
        files[name] = data
    path_counts = Counter(r[3] for r in rows)
    report: dict[str, object] = {
        "requests": len(rows),
        "status_5xx": sum(1 for r in rows if r[4].startswith("5")),
        "unique_ips": len({r[0] for r in rows}),
        "top_paths": [[p, c] for p, c in sorted(path_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]],
    }
    fields = [
        "`requests`: the number of well-formed request lines",
        "`status_5xx`: how many of them have a 5xx status",
        "`unique_ips`: the number of distinct client IPs",
        "`top_paths`: the three most requested paths as `[path, count]` pairs, most requested "
        "first, ties broken by path in byte order",
    ]
    if level >= 2:
        by: Counter[str] = Counter()
        for r in rows:
            by[r[2]] += int(r[5])
        report["bytes_by_method"] = dict(sorted(by.items()))
        fields.append("`bytes_by_method`: an object mapping each HTTP method to the sum of response bytes")
    if level == 3:
        hours = Counter(r[1] for r in rows)
        report["busiest_hour"] = sorted(hours.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        fields.append(
            '`busiest_hour`: the UTC hour with the most requests as `"YYYY-MM-DDTHH"` (earliest on ties)'
        )
    where = (
        "`/app/logs/access.log`"
        if level == 1
        else "all of `/app/logs/access.log*` (rotated files included; `.gz` files are gzip-compressed)"
    )
    instruction = (
        f"""# Summarise web server logs

Analyse {where}. Lines are in the common log format:

    IP - - [DD/Mon/YYYY:HH:MM:SS +0000] "METHOD PATH HTTP/1.1" STATUS BYTES

{"Some lines are malformed; skip every line that does not match this format exactly." if level == 3 else ""}
Write `/app/out/report.json`, a JSON object with exactly these keys:

"""
        + "\n".join(f"- {f}" for f in fields)
        + "\n"
    )
    solve = "#!/bin/sh\nset -e\nmkdir -p /app/out\n" + heredoc("/tmp/solve_logs.py", _LOG_SOLVER)
    solve += f"python3 /tmp/solve_logs.py {level}\n"
    wrong = solve.replace('r[7].startswith("5")', 'r[7] >= "400"')
    body = """
text = read_text("/app/out/report.json")
try:
    got = json.loads(text) if text is not None else None
except ValueError:
    got = None
if check(isinstance(got, dict), "report.json is not a JSON object"):
    check(sorted(got) == sorted(REPORT), f"keys {sorted(got)}, expected {sorted(REPORT)}")
    for k, v in REPORT.items():
        check(got.get(k) == v, f"{k} is {got.get(k)!r}, expected another value")
"""
    return TaskDraft(
        name="",
        description="Aggregate statistics from (rotated, compressed) access logs into a JSON report.",
        instruction=instruction,
        files={
            **{f"environment/files/logs/{k}": v for k, v in files.items()},
            "tests/test.sh": GRADE_TEST_SH,
            "tests/grade.py": grader(body, REPORT=report),
            "solution/solve.sh": solve,
            "solution/wrong.sh": wrong,
        },
        required_steps=len(fields) + len(plan),
        metadata={"n_lines": len(rows)},
        test_reads=("out/report.json",),
        checkpoints=(
            Checkpoint(
                "report-written", "python3 -c 'import json;json.load(open(\"/app/out/report.json\"))'"
            ),
        ),
    )


# ---------------------------------------------------------------------------------------------- service

_SERVER = r'''"""A tiny key/value service. Usage: python3 /app/service/server.py --port PORT"""
import argparse, hashlib, json, os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = "/app/run"
with open(os.path.join(HERE, "data.json")) as f:
    DATA = json.load(f)


def log(line):
    with open(os.path.join(RUN, "access.log"), "a") as f:
        f.write(line + "\n")


def value(key):
    return int(hashlib.sha256((DATA["salt"] + key).encode()).hexdigest()[:8], 16) % 100000


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        parts = self.path.split("?", 1)
        path, query = parts[0], parts[1] if len(parts) > 1 else ""
        if path.startswith("/value/") and path[7:] in DATA["keys"]:
            body = {"key": path[7:], "value": value(path[7:])}
        elif path == "/keys":
            page = int(query.split("=", 1)[1]) if query.startswith("page=") else 0
            size = DATA["page_size"]
            chunk = DATA["keys"][page * size:(page + 1) * size]
            more = (page + 1) * size < len(DATA["keys"])
            body = {"keys": chunk, "next": page + 1 if more else None}
        else:
            self.send_error(404)
            log(f"404 GET {self.path}")
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        log(f"200 GET {self.path}")

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    port = ap.parse_args().port
    os.makedirs(RUN, exist_ok=True)
    server = HTTPServer(("127.0.0.1", port), Handler)
    pidfile = os.path.join(RUN, "server.pid")

    def stop(signum, frame):
        log("shutdown")
        try:
            os.remove(pidfile)
        except OSError:
            pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    with open(pidfile, "w") as f:
        f.write(f"{os.getpid()}\n")
    log(f"listening {port}")
    server.serve_forever()


if __name__ == "__main__":
    main()
'''

_CLIENT = r"""import json, sys, urllib.request
port, level = int(sys.argv[1]), int(sys.argv[2])
base = f"http://127.0.0.1:{port}"
if level == 3:
    keys, page = [], 0
    while page is not None:
        doc = json.load(urllib.request.urlopen(f"{base}/keys?page={page}"))
        keys += doc["keys"]
        page = doc["next"]
else:
    keys = open("/app/keys.txt").read().split()
values = [json.load(urllib.request.urlopen(f"{base}/value/{k}"))["value"] for k in keys]
with open("/app/out/values.txt", "w") as f:
    f.writelines(f"{k} {v}\n" for k, v in zip(keys, values))
if level >= 2:
    with open("/app/out/total.txt", "w") as f:
        f.write(f"{sum(values)}\n")
"""


def _service(rng: random.Random, level: int) -> TaskDraft:
    port = 20000 + rng.randrange(20000)
    n_keys = {1: 5, 2: 15, 3: 40}[level]
    keys = [f"{rng.choice(WORDS)}-{rng.randrange(1000):03d}" for _ in range(n_keys)]
    keys = list(dict.fromkeys(keys))
    salt = f"{rng.randrange(16**16):016x}"
    values = [int(sha256_hex(salt + k)[:8], 16) % 100000 for k in keys]
    data = {"keys": keys, "salt": salt, "page_size": 7}
    source = (
        "the keys listed in `/app/keys.txt`, one per line"
        if level < 3
        else 'every key the service knows: `GET /keys?page=0` returns `{"keys": [...], "next": 1}`; '
        "keep requesting the `next` page until `next` is `null`"
    )
    steps = [
        f"Start the service in the background: `python3 /app/service/server.py --port {port}`. It listens on "
        f"`127.0.0.1:{port}` and writes its process id to `/app/run/server.pid` once it is ready.",
        f'For {source}, request `GET /value/KEY` (the reply is `{{"key": ..., "value": N}}`) and write '
        "`/app/out/values.txt` with one line `KEY VALUE` per key, in that order.",
    ]
    if level >= 2:
        steps.append("Write the sum of all values to `/app/out/total.txt` as a bare integer.")
        steps.append(
            "Stop the service cleanly by sending SIGTERM to the process id in the pidfile; it removes "
            "the pidfile and logs `shutdown` when it stops."
        )
    instruction = "# Use a local service\n\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    instruction += "\n\nThe service records every request in `/app/run/access.log`; do not edit that file.\n"
    solve = (
        f"""#!/bin/sh
set -e
mkdir -p /app/run /app/out
python3 /app/service/server.py --port {port} > /tmp/server.out 2>&1 &
i=0
while [ ! -s /app/run/server.pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
"""
        + heredoc("/tmp/client.py", _CLIENT)
        + f"python3 /tmp/client.py {port} {level}\n"
    )
    solve += 'kill "$(cat /app/run/server.pid)"\ni=0\n'
    solve += "while [ -e /app/run/server.pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\n"
    body = """
got = read_text("/app/out/values.txt")
want = [f"{k} {v}" for k, v in zip(KEYS, VALUES)]
if got is not None:
    check(got.strip().splitlines() == want, "values.txt does not hold the expected KEY VALUE lines")
log = read_text("/app/run/access.log") or ""
served = {line.split(" ", 2)[2] for line in log.splitlines() if line.startswith("200 GET ")}
missing = [k for k in KEYS if f"/value/{k}" not in served]
check(not missing, f"the service never served {len(missing)} of the keys (query it, do not compute)")
if LEVEL >= 2:
    total = read_text("/app/out/total.txt")
    check(total is not None and total.strip() == str(sum(VALUES)), "total.txt is wrong")
    check(log.rstrip().endswith("shutdown"), "the service was not stopped with SIGTERM")
    check(not os.path.exists("/app/run/server.pid"), "the pidfile is still there")
if LEVEL >= 3:
    check("/keys?page=0" in served, "the key list was not fetched from the service")
"""
    files: dict[str, str | bytes] = {
        "environment/files/service/server.py": _SERVER,
        "environment/files/service/data.json": dumps_json(data),
        "tests/test.sh": GRADE_TEST_SH,
        "tests/grade.py": grader(body, KEYS=keys, VALUES=values, LEVEL=level),
        "solution/solve.sh": solve,
    }
    if level < 3:
        files["environment/files/keys.txt"] = "".join(k + "\n" for k in keys)
    if level >= 2:
        files["solution/wrong.sh"] = solve.split('kill "$(cat')[0]  # never stops the service
    return TaskDraft(
        name="",
        description="Start a local HTTP service in the background, query it, then stop it.",
        instruction=instruction,
        files=files,
        required_steps=len(steps) + 1,
        metadata={"port": port, "n_keys": len(keys)},
        test_reads=("out/values.txt", "out/total.txt", "run/access.log", "run/server.pid")
        if level >= 2
        else ("out/values.txt", "run/access.log"),
        checkpoints=(
            Checkpoint("service-started", "test -s /app/run/access.log"),
            Checkpoint("values-written", "test -s /app/out/values.txt"),
        ),
    )


@register_family
class TerminalFamily(TaskFamily):
    name = "terminal"
    version = 1
    domain = "terminal"
    description = "Shell work: search and copy files, nested archives, permissions, log reports, services."

    def kinds(self) -> Mapping[str, Generator]:
        return {"search": _search, "archive": _archive, "perms": _perms, "logs": _logs, "service": _service}
