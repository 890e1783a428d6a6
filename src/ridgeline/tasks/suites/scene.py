"""``scene``: build or edit a 3D scene description and render it with a bundled rasteriser.

Modelled on BlenderGym's generate → render → verify → refine loop, without Blender or a GPU: the
agent edits ``/app/scene.json`` and runs ``/app/render.py`` (:mod:`ridgeline.tasks.suites.scene_render`),
whose feedback (image-space boxes, in/out of frame, overlaps) is what it acts on. The verifier checks
layout constraints (types, sizes, colours, "on top of", "left of", resting on the ground, in frame,
no intersections, light count, untouched objects) and that ``/app/render.png`` is a valid PNG of the
right size whose ``scene-sha256`` text chunk matches the final scene file, so a stale render fails.

The grader re-implements nothing: it embeds the renderer's own projection and bounds functions, so
"in frame" means the same thing to the agent's tool and to the verifier.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ridgeline.tasks.suites import scene_render
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

CAMERA: dict[str, Any] = {
    "position": [0.0, 3.5, 10.0],
    "look_at": [0.0, 0.8, -1.0],
    "fov": 50,
    "width": 240,
    "height": 160,
}
COLORS: dict[str, list[float]] = {
    "red": [0.9, 0.1, 0.1],
    "green": [0.1, 0.8, 0.2],
    "blue": [0.1, 0.3, 0.9],
    "yellow": [0.95, 0.85, 0.1],
    "orange": [1.0, 0.55, 0.0],
    "purple": [0.6, 0.2, 0.8],
    "white": [0.95, 0.95, 0.95],
    "grey": [0.5, 0.5, 0.5],
}
_NAMES = (
    "crate",
    "plinth",
    "block",
    "drum",
    "orb",
    "pebble",
    "tower",
    "cube",
    "globe",
    "dais",
    "brick",
    "marble",
    "slab",
    "bead",
)
_SLOTS_X = (-5.4, -3.6, -1.8, 0.0, 1.8, 3.6, 5.4)
_SLOTS_Z = (0.0, -2.5)
_TOL = 0.05

_GEOMETRY = "\n\n".join(
    inspect.getsource(f)
    for f in (
        scene_render._sub,
        scene_render._dot,
        scene_render._cross,
        scene_render._norm,
        scene_render.camera_basis,
        scene_render.project,
        scene_render.box_corners,
        scene_render.aabb,
    )
)

_SCENE_BODY = (
    """
import hashlib
import math
import struct
import zlib
from typing import Any

"""
    + _GEOMETRY
    + """


def png_problems(data, width, height, digest):
    if data[:8] != b"\\x89PNG\\r\\n\\x1a\\n":
        return "render.png is not a PNG file"
    pos, chunks = 8, {}
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I", data[pos:pos + 4])[0], data[pos + 4:pos + 8]
        body, crc = data[pos + 8:pos + 8 + n], data[pos + 8 + n:pos + 12 + n]
        if len(crc) != 4 or struct.unpack(">I", crc)[0] != zlib.crc32(kind + body):
            return "render.png has a corrupt chunk"
        chunks.setdefault(kind, []).append(body)
        pos += 12 + n
        if kind == b"IEND":
            break
    if b"IHDR" not in chunks or b"IEND" not in chunks:
        return "render.png lacks IHDR or IEND"
    w, h, depth, ctype = struct.unpack(">IIBB", chunks[b"IHDR"][0][:10])
    if (w, h) != (width, height) or (depth, ctype) != (8, 2):
        return f"render.png is {w}x{h} (depth {depth}, type {ctype}); expected {width}x{height} RGB"
    try:
        raw = zlib.decompress(b"".join(chunks.get(b"IDAT", [])))
    except zlib.error:
        return "render.png has unreadable image data"
    if len(raw) != h * (1 + 3 * w):
        return "render.png image data has the wrong size"
    texts = dict(t.split(b"\\x00", 1) for t in chunks.get(b"tEXt", []) if b"\\x00" in t)
    if texts.get(b"scene-sha256", b"").decode("latin-1") != digest:
        return "render.png was not rendered from the final scene.json (render again after editing)"
    return None


raw = None
try:
    with open("/app/scene.json", "rb") as f:
        raw = f.read()
    scene = json.loads(raw)
except (OSError, ValueError) as exc:
    scene = None
    check(False, f"/app/scene.json is missing or not JSON: {exc}")
objs = {}
if isinstance(scene, dict):
    for o in scene.get("objects", []) if isinstance(scene.get("objects"), list) else []:
        if isinstance(o, dict) and isinstance(o.get("name"), str):
            check(o["name"] not in objs, f"two objects are named {o['name']!r}")
            objs[o["name"]] = o
    check(scene.get("camera") == CAMERA, "the camera must be exactly the one given")


def near(a, b, tol):
    try:
        return len(a) == len(b) and all(abs(float(x) - float(y)) <= tol for x, y in zip(a, b))
    except (TypeError, ValueError):
        return False


def bounds(name):
    try:
        return aabb(objs[name])
    except (KeyError, TypeError, ValueError, IndexError):
        return None


for c in CONSTRAINTS if isinstance(scene, dict) else []:
    k = c["kind"]
    if k == "exists":
        o = objs.get(c["name"])
        check(o is not None and o.get("type") == c["type"], f"no {c['type']} named {c['name']!r}")
    elif k == "absent":
        check(c["name"] not in objs, f"{c['name']!r} should have been removed")
    elif k == "color":
        check(near(objs.get(c["name"], {}).get("color", []), c["rgb"], 0.02), f"{c['name']}: wrong colour")
    elif k == "size":
        check(near(objs.get(c["name"], {}).get("size", []), c["size"], 1e-3), f"{c['name']}: wrong size")
    elif k == "radius":
        got = objs.get(c["name"], {}).get("radius", -1)
        check(near([got], [c["radius"]], 1e-3), f"{c['name']}: wrong radius")
    elif k == "on_ground":
        b = bounds(c["name"])
        check(b is not None and abs(b[0][1]) <= TOL, f"{c['name']} is not resting on the ground (y = 0)")
    elif k == "on_top":
        a, b = bounds(c["a"]), bounds(c["b"])
        ok = a is not None and b is not None and abs(a[0][1] - b[1][1]) <= TOL
        if ok:
            cx, cz = (a[0][0] + a[1][0]) / 2, (a[0][2] + a[1][2]) / 2
            ok = b[0][0] <= cx <= b[1][0] and b[0][2] <= cz <= b[1][2]
        check(ok, f"{c['a']} is not resting on top of {c['b']}")
    elif k == "left_of":
        a, b = bounds(c["a"]), bounds(c["b"])
        ok = a is not None and b is not None and a[1][0] <= b[0][0] + 1e-6
        check(ok, f"{c['a']} is not left of {c['b']}")
    elif k == "in_frame":
        b = bounds(c["name"])
        ok = b is not None
        if ok:
            basis = camera_basis(CAMERA)
            for x in (b[0][0], b[1][0]):
                for y in (b[0][1], b[1][1]):
                    for z in (b[0][2], b[1][2]):
                        sx, sy, sz = project(basis, [x, y, z])
                        ok = ok and sz > 0.05 and 0 <= sx <= basis["w"] and 0 <= sy <= basis["h"]
        check(ok, f"{c['name']} is not fully in frame")
    elif k == "no_overlaps":
        names = sorted(objs)
        for i, m in enumerate(names):
            for n in names[i + 1:]:
                a, b = bounds(m), bounds(n)
                if a is not None and b is not None:
                    depth = min(min(a[1][j], b[1][j]) - max(a[0][j], b[0][j]) for j in range(3))
                    check(depth <= 1e-3, f"{m} and {n} intersect")
    elif k == "lights":
        lights = scene.get("lights")
        check(isinstance(lights, list) and len(lights) == c["count"], f"expected exactly {c['count']} lights")
    elif k == "unchanged":
        o = objs.get(c["name"], {})
        same = o.get("type") == c["obj"]["type"] and all(
            near(o.get(f, []) if isinstance(c["obj"][f], list) else [o.get(f, -1)],
                 c["obj"][f] if isinstance(c["obj"][f], list) else [c["obj"][f]], 1e-6)
            for f in c["obj"] if f not in ("name", "type"))
        check(same, f"{c['name']} should not have changed")
    elif k == "count":
        check(len(objs) == c["count"], f"expected {c['count']} objects, found {len(objs)}")
if raw is not None:
    try:
        with open("/app/render.png", "rb") as f:
            digest = hashlib.sha256(raw).hexdigest()
            problem = png_problems(f.read(), CAMERA["width"], CAMERA["height"], digest)
    except OSError:
        problem = "/app/render.png is missing: render the scene"
    check(problem is None, problem)
"""
)

_RENDER = "python3 /app/render.py /app/scene.json -o /app/render.png"


def _renderer_source() -> str:
    return Path(scene_render.__file__).read_text(encoding="utf-8")


def _box(rng: random.Random, name: str, color: str) -> dict[str, Any]:
    size = [round(rng.uniform(0.8, 1.2), 2), round(rng.uniform(0.5, 1.0), 2), round(rng.uniform(0.8, 1.2), 2)]
    return {"name": name, "type": "box", "size": size, "color": COLORS[color], "position": [0.0, 0.0, 0.0]}


def _sphere(rng: random.Random, name: str, color: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "sphere",
        "radius": round(rng.uniform(0.3, 0.5), 2),
        "color": COLORS[color],
        "position": [0.0, 0.0, 0.0],
    }


def _half_height(o: Mapping[str, Any]) -> float:
    return float(o["radius"]) if o["type"] == "sphere" else float(o["size"][1]) / 2


def _put(o: dict[str, Any], x: float, bottom: float, z: float) -> None:
    o["position"] = [x, round(bottom + _half_height(o), 4), z]


def _top(o: Mapping[str, Any]) -> float:
    return float(o["position"][1]) + _half_height(o)


def _describe(o: Mapping[str, Any], color_name: str) -> str:
    shape = (
        f"a sphere of radius {o['radius']}"
        if o["type"] == "sphere"
        else "a box of size {} × {} × {} (x × y × z)".format(*o["size"])
    )
    return f"`{o['name']}`: {shape}, colour `{color_name}` = {o['color']}"


def _shape_constraints(o: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"kind": "exists", "name": o["name"], "type": o["type"]},
        {"kind": "color", "name": o["name"], "rgb": o["color"]},
    ]
    if o["type"] == "box":
        out.append({"kind": "size", "name": o["name"], "size": o["size"]})
    else:
        out.append({"kind": "radius", "name": o["name"], "radius": o["radius"]})
    return out


def _scene_json(objects: list[dict[str, Any]], lights: list[dict[str, Any]]) -> str:
    return dumps_json({"camera": CAMERA, "lights": lights, "objects": objects})


def _lights(rng: random.Random, n: int) -> list[dict[str, Any]]:
    return [
        {
            "position": [
                round(rng.uniform(-6, 6), 1),
                round(rng.uniform(4, 8), 1),
                round(rng.uniform(2, 8), 1),
            ],
            "intensity": round(rng.uniform(0.5, 1.0), 2),
        }
        for _ in range(n)
    ]


def _files(
    scene_text: str | None, constraints: list[dict[str, Any]], solve_scene: str, wrong: str | None
) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {
        "environment/files/render.py": _renderer_source(),
        "tests/test.sh": GRADE_TEST_SH,
        "tests/grade.py": grader(_SCENE_BODY, CONSTRAINTS=constraints, CAMERA=CAMERA, TOL=_TOL),
        "solution/solve.sh": "#!/bin/sh\nset -e\n" + heredoc("/app/scene.json", solve_scene) + _RENDER + "\n",
    }
    if scene_text is not None:
        files["environment/files/scene.json"] = scene_text
    if wrong is not None:
        files["solution/wrong.sh"] = wrong
    return files


_CHECKPOINTS = (
    Checkpoint("scene-parses", "python3 -c 'import json; json.load(open(\"/app/scene.json\"))'"),
    Checkpoint("rendered", "test -s /app/render.png"),
)


# ---------------------------------------------------------------------------------------------- compose


def _compose(rng: random.Random, level: int) -> TaskDraft:
    n_cols, n_lights = {1: (1, 1), 2: (3, 2), 3: (4, 3)}[level]
    names = rng.sample(_NAMES, 8)
    colors = rng.sample(sorted(COLORS), 8)
    xs = sorted(rng.sample(_SLOTS_X, n_cols))
    objects: list[dict[str, Any]] = []
    cons: list[dict[str, Any]] = []
    lines: list[str] = []
    grounds: list[dict[str, Any]] = []
    k = 0
    for ci, x in enumerate(xs):
        height = {1: [2], 2: [2, 1, 1], 3: [3, 1, 2, 1]}[level][ci]
        stack: list[dict[str, Any]] = []
        for hi in range(height):
            is_top = hi == height - 1 and height > 1
            o = (_sphere if is_top or (height == 1 and ci % 2) else _box)(rng, names[k], colors[k])
            _put(o, x, _top(stack[-1]) if stack else 0.0, 0.0)
            stack.append(o)
            objects.append(o)
            cons += _shape_constraints(o)
            cons.append({"kind": "in_frame", "name": o["name"]})
            lines.append(_describe(o, colors[k]))
            k += 1
        grounds.append(stack[0])
        cons.append({"kind": "on_ground", "name": stack[0]["name"]})
        lines.append(f"`{stack[0]['name']}` rests on the ground (its lowest point at y = 0)")
        for below, above in itertools.pairwise(stack):
            cons.append({"kind": "on_top", "a": above["name"], "b": below["name"]})
            lines.append(f"`{above['name']}` rests on top of `{below['name']}` (touching, centred over it)")
    for a, b in itertools.pairwise(grounds):
        cons.append({"kind": "left_of", "a": a["name"], "b": b["name"]})
        lines.append(f"`{a['name']}` is left of `{b['name']}` (entirely at smaller x)")
    cons += [{"kind": "lights", "count": n_lights}, {"kind": "count", "count": len(objects)}]
    if level >= 2:
        cons.append({"kind": "no_overlaps"})
        lines.append("no two objects intersect")
    lines.append(f"exactly {n_lights} point light(s), and every object fully in frame")
    target = _scene_json(objects, _lights(rng, n_lights))
    bad = copy.deepcopy(objects)
    bad[1 if len(bad) > 1 else 0]["position"][1] += 0.4  # floats above what it should rest on
    wrong = (
        "#!/bin/sh\nset -e\n"
        + heredoc("/app/scene.json", _scene_json(bad, _lights(rng, n_lights)))
        + _RENDER
        + "\n"
    )
    instruction = (
        f"""# Build a 3D scene

Write `/app/scene.json` describing a scene with exactly these {len(objects)} objects and properties, then
render it with `{_RENDER}` (the renderer reports each object's image-space box, whether it is in
frame, and any intersections; its header documents the scene format).

"""
        + "\n".join(f"- {line}" for line in lines)
        + f"""

Use exactly this camera: `{dumps_json(CAMERA, indent=None)}`. Positions are object centres, y is up,
+x is to the right of the image. Tolerances: ±{_TOL} for resting contacts, ±0.02 per colour channel.
Render again after your last change: the verifier checks that `/app/render.png` matches the final scene.
"""
    )
    return TaskDraft(
        name="",
        description="Compose a 3D scene that satisfies layout constraints and render it.",
        instruction=instruction,
        files=_files(None, cons, target, wrong),
        required_steps=2 + len(objects) + (1 if level >= 2 else 0),
        metadata={"n_objects": len(objects), "n_lights": n_lights, "n_constraints": len(cons)},
        test_reads=("scene.json", "render.png"),
        checkpoints=_CHECKPOINTS,
    )


# ---------------------------------------------------------------------------------------------- edit


def _edit(rng: random.Random, level: int) -> TaskDraft:
    n_objects = {1: 3, 2: 5, 3: 8}[level]
    names = rng.sample(_NAMES, n_objects)
    colors = [rng.choice(sorted(COLORS)) for _ in range(n_objects)]
    slots = [(x, z) for z in _SLOTS_Z for x in _SLOTS_X]
    rng.shuffle(slots)
    objects = []
    for i, name in enumerate(names):
        o = (_sphere if i % 3 == 1 else _box)(rng, name, colors[i])
        x, z = slots.pop()
        _put(o, x, 0.0, z)
        objects.append(o)
    start = copy.deepcopy(objects)
    lights = _lights(rng, 1 + level // 2)
    start_lights = list(lights)
    touched: set[str] = set()
    cons: list[dict[str, Any]] = []
    steps: list[str] = []
    # 1. recolour
    a = objects[0]
    new_color = rng.choice([c for c in sorted(COLORS) if COLORS[c] != a["color"]])
    a["color"] = COLORS[new_color]
    touched.add(a["name"])
    cons.append({"kind": "color", "name": a["name"], "rgb": COLORS[new_color]})
    steps.append(f"Recolour `{a['name']}` to `{new_color}` = {COLORS[new_color]}.")
    # 2. stack a sphere on a box
    mover, base = objects[1], objects[2]
    _put(mover, base["position"][0], _top(base), base["position"][2])
    touched.add(mover["name"])
    cons.append({"kind": "on_top", "a": mover["name"], "b": base["name"]})
    steps.append(
        f"Move `{mover['name']}` so that it rests on top of `{base['name']}` (touching, centred over it)."
    )
    if level >= 2:
        lost = objects[3]
        start[3]["position"][0] = rng.choice([-14.0, 14.0])  # starts out of frame
        x, z = slots.pop()
        _put(lost, x, 0.0, z)
        touched.add(lost["name"])
        cons += [{"kind": "in_frame", "name": lost["name"]}, {"kind": "on_ground", "name": lost["name"]}]
        steps.append(
            f"`{lost['name']}` is out of frame: move it (not the camera) so it is fully in frame, resting "
            "on the ground."
        )
        lights = [*lights, _lights(rng, 1)[0]]
        steps.append(f"Add one point light (the scene must end with {len(lights)} lights).")
        cons.append({"kind": "lights", "count": len(lights)})
    removed: str | None = None
    if level == 3:
        removed = objects[4]["name"]
        steps.append(f"Delete `{removed}`.")
        cons.append({"kind": "absent", "name": removed})
        grow = next(o for o in objects[5:] if o["type"] == "box")
        grow["size"] = [round(v * 1.25, 2) for v in grow["size"]]
        _put(grow, grow["position"][0], 0.0, grow["position"][2])
        touched.add(grow["name"])
        cons += [
            {"kind": "size", "name": grow["name"], "size": grow["size"]},
            {"kind": "on_ground", "name": grow["name"]},
        ]
        steps.append(
            f"Scale `{grow['name']}` by 1.25 in every dimension (sizes rounded to 2 decimals) and keep it "
            "resting on the ground."
        )
        clash = next(o for o in objects[5:] if o is not grow)
        si = objects.index(clash)
        start[si]["position"][0] = round(grow["position"][0] + 0.3, 4)  # starts inside another object
        start[si]["position"][2] = grow["position"][2]
        x, z = slots.pop()
        _put(clash, x, 0.0, z)
        touched.add(clash["name"])
        cons.append({"kind": "in_frame", "name": clash["name"]})
        steps.append(
            "Some objects intersect: move objects (without resizing them) until no two intersect, keeping "
            "every object in frame."
        )
    cons.append({"kind": "no_overlaps"})
    for o in start:
        if o["name"] not in touched and o["name"] != removed:
            cons.append({"kind": "unchanged", "name": o["name"], "obj": o})
    final = [o for o in objects if o["name"] != removed]
    cons.append({"kind": "count", "count": len(final)})
    target = _scene_json(final, lights)
    start_text = _scene_json(start, start_lights)
    stale = "#!/bin/sh\nset -e\n" + _RENDER + "\n" + heredoc("/app/scene.json", target)  # renders, then edits
    instruction = (
        f"""# Edit a 3D scene

`/app/scene.json` describes a scene; `{_RENDER}` renders it and reports each object's image-space box,
whether it is in frame, and any intersections (its header documents the format). Make these edits:

"""
        + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
        + f"""

Leave everything else unchanged (other objects, the camera). Positions are object centres, y is up.
Tolerance ±{_TOL} for resting contacts. Render after your last change: the verifier checks that
`/app/render.png` matches the final scene.
"""
    )
    return TaskDraft(
        name="",
        description="Edit a 3D scene (recolour, stack, reframe, delete, resolve overlaps) and render it.",
        instruction=instruction,
        files=_files(start_text, cons, target, stale),
        required_steps=2 + len(steps),
        metadata={"n_objects": n_objects, "n_edits": len(steps)},
        test_reads=("scene.json", "render.png"),
        checkpoints=_CHECKPOINTS,
    )


@register_family
class SceneFamily(TaskFamily):
    name = "scene"
    version = 1
    domain = "scene"
    description = (
        "3D scene creation and editing with a bundled software renderer; layout constraints checked."
    )

    def kinds(self) -> Mapping[str, Generator]:
        return {"compose": _compose, "edit": _edit}
