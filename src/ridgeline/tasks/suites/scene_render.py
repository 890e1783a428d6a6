"""A tiny software rasteriser for ``scene`` tasks (shipped into each task as ``/app/render.py``).

Standard library only, no GPU: boxes and spheres are tessellated into triangles, projected with a
pinhole camera, z-buffered and flat-shaded with point lights (Lambert plus ambient), then written as
an RGB PNG with ``zlib``. The PNG carries a ``tEXt`` chunk ``scene-sha256`` holding the SHA-256 of
the scene file's bytes, so a verifier can tell whether a render belongs to the final scene.

Usage::

    python3 render.py scene.json -o render.png

Scene format (JSON; y is up, the default camera looks along -z so +x is to the right)::

    {"camera": {"position": [0, 3, 12], "look_at": [0, 1, 0], "fov": 50, "width": 160, "height": 120},
     "lights": [{"position": [4, 6, 6], "intensity": 1.0}],
     "objects": [{"name": "crate", "type": "box", "position": [0, 0.5, 0], "size": [1, 1, 1],
                  "rotation_y": 0, "color": [0.8, 0.2, 0.2]},
                 {"name": "ball", "type": "sphere", "position": [0, 1.5, 0], "radius": 0.5,
                  "color": [0.2, 0.4, 0.9]}]}

``position`` is an object's centre; colours are RGB in 0..1. The renderer prints feedback an agent
can act on: each object's bounding box in image space, whether it is in frame, how many pixels it
covers, and which objects intersect.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import sys
import zlib
from typing import Any

AMBIENT = 0.15


def _sub(a: list[float], b: list[float]) -> list[float]:
    return [a[0] - b[0], a[1] - b[1], a[2] - b[2]]


def _dot(a: list[float], b: list[float]) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a: list[float], b: list[float]) -> list[float]:
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def _norm(a: list[float]) -> list[float]:
    n = math.sqrt(_dot(a, a)) or 1.0
    return [a[0] / n, a[1] / n, a[2] / n]


def camera_basis(cam: dict[str, Any]) -> dict[str, Any]:
    """Position, orthonormal axes, focal factor and image size of a camera."""
    pos = [float(v) for v in cam["position"]]
    fwd = _norm(_sub([float(v) for v in cam["look_at"]], pos))
    right = _norm(_cross(fwd, [0.0, 1.0, 0.0]))
    up = _cross(right, fwd)
    w, h = int(cam.get("width", 160)), int(cam.get("height", 120))
    f = 1.0 / math.tan(math.radians(float(cam.get("fov", 50))) / 2)
    return {"pos": pos, "fwd": fwd, "right": right, "up": up, "f": f, "w": w, "h": h}


def project(basis: dict[str, Any], p: list[float]) -> tuple[float, float, float]:
    """Image coordinates (x right, y down, in pixels) and depth of world point ``p``."""
    d = _sub(p, basis["pos"])
    x, y, z = _dot(d, basis["right"]), _dot(d, basis["up"]), _dot(d, basis["fwd"])
    zz = max(z, 1e-6)
    aspect = basis["w"] / basis["h"]
    sx = (basis["f"] * x / zz / aspect + 1) / 2 * basis["w"]
    sy = (1 - basis["f"] * y / zz) / 2 * basis["h"]
    return sx, sy, z


def aabb(obj: dict[str, Any]) -> tuple[list[float], list[float]]:
    """World-space axis-aligned bounds ``(lo, hi)`` of a box (rotation included) or sphere."""
    c = [float(v) for v in obj["position"]]
    if obj["type"] == "sphere":
        r = float(obj["radius"])
        return [c[0] - r, c[1] - r, c[2] - r], [c[0] + r, c[1] + r, c[2] + r]
    corners = box_corners(obj)
    return [min(p[i] for p in corners) for i in range(3)], [max(p[i] for p in corners) for i in range(3)]


def box_corners(obj: dict[str, Any]) -> list[list[float]]:
    c = [float(v) for v in obj["position"]]
    sx, sy, sz = (float(v) / 2 for v in obj["size"])
    a = math.radians(float(obj.get("rotation_y", 0)))
    ca, sa = math.cos(a), math.sin(a)
    out = []
    for dx in (-sx, sx):
        for dy in (-sy, sy):
            for dz in (-sz, sz):
                out.append([c[0] + dx * ca + dz * sa, c[1] + dy, c[2] - dx * sa + dz * ca])
    return out


def _triangles(obj: dict[str, Any]) -> list[tuple[list[float], list[float], list[float]]]:
    if obj["type"] == "box":
        k = box_corners(obj)  # index = 4*ix + 2*iy + iz
        quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
        faces: list[tuple[list[float], list[float], list[float]]] = []
        for i0, i1, i2, i3 in quads:
            faces += [(k[i0], k[i1], k[i2]), (k[i0], k[i2], k[i3])]
        return faces
    c, r = [float(v) for v in obj["position"]], float(obj["radius"])
    rings, segs = 10, 16

    def pt(i: int, j: int) -> list[float]:
        th, ph = math.pi * i / rings, 2 * math.pi * j / segs
        return [
            c[0] + r * math.sin(th) * math.cos(ph),
            c[1] + r * math.cos(th),
            c[2] + r * math.sin(th) * math.sin(ph),
        ]

    tris: list[tuple[list[float], list[float], list[float]]] = []
    for i in range(rings):
        for j in range(segs):
            p0, p1, p2, p3 = pt(i, j), pt(i + 1, j), pt(i + 1, j + 1), pt(i, j + 1)
            tris += [(p0, p1, p2), (p0, p2, p3)]
    return tris


def validate(scene: Any) -> list[str]:
    """Problems with a scene's structure, as messages; empty when it can be rendered."""
    errs: list[str] = []
    if not isinstance(scene, dict):
        return ["the scene must be a JSON object with camera, lights and objects"]
    cam = scene.get("camera")
    if not isinstance(cam, dict) or not all(k in cam for k in ("position", "look_at")):
        errs.append("camera must be an object with position and look_at (fov, width, height optional)")
    if not isinstance(scene.get("lights"), list):
        errs.append("lights must be a list of {position, intensity}")
    objs = scene.get("objects")
    if not isinstance(objs, list):
        return [*errs, "objects must be a list"]
    for i, o in enumerate(objs):
        if not isinstance(o, dict) or o.get("type") not in ("box", "sphere"):
            errs.append(f"objects[{i}]: type must be 'box' or 'sphere'")
            continue
        need = ["name", "position", "color"] + (["size"] if o["type"] == "box" else ["radius"])
        errs += [f"objects[{i}] ({o.get('name', '?')}): missing {k}" for k in need if k not in o]
    return errs


def render(scene: dict[str, Any]) -> tuple[int, int, bytearray, dict[str, Any]]:
    """Rasterise ``scene``; return width, height, RGB bytes and a feedback report."""
    b = camera_basis(scene["camera"])
    w, h = b["w"], b["h"]
    zbuf = [math.inf] * (w * h)
    owner = [-1] * (w * h)
    rgb = bytearray([30, 30, 36] * (w * h))
    lights = scene.get("lights", [])
    objects = scene["objects"]
    for oi, obj in enumerate(objects):
        color = [float(v) for v in obj["color"]]
        for tri in _triangles(obj):
            n = _norm(_cross(_sub(tri[1], tri[0]), _sub(tri[2], tri[0])))
            centroid = [sum(p[i] for p in tri) / 3 for i in range(3)]
            if _dot(n, _sub(b["pos"], centroid)) < 0:
                n = [-n[0], -n[1], -n[2]]
            shade = AMBIENT
            for light in lights:
                ldir = _norm(_sub([float(v) for v in light["position"]], centroid))
                shade += float(light.get("intensity", 1.0)) * max(0.0, _dot(n, ldir))
            px = bytes(min(255, int(255 * min(1.0, c * shade))) for c in color)
            pts = [project(b, p) for p in tri]
            if any(p[2] <= 0.05 for p in pts):
                continue
            x0, x1 = max(0, int(min(p[0] for p in pts))), min(w - 1, int(max(p[0] for p in pts)) + 1)
            y0, y1 = max(0, int(min(p[1] for p in pts))), min(h - 1, int(max(p[1] for p in pts)) + 1)
            (ax, ay, az), (bx, by, bz), (cx, cy, cz) = pts
            area = (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)
            if abs(area) < 1e-9:
                continue
            for y in range(y0, y1 + 1):
                for x in range(x0, x1 + 1):
                    qx, qy = x + 0.5, y + 0.5
                    w0 = ((bx - qx) * (cy - qy) - (by - qy) * (cx - qx)) / area
                    w1 = ((cx - qx) * (ay - qy) - (cy - qy) * (ax - qx)) / area
                    w2 = 1 - w0 - w1
                    if w0 < 0 or w1 < 0 or w2 < 0:
                        continue
                    z = w0 * az + w1 * bz + w2 * cz
                    k = y * w + x
                    if z < zbuf[k]:
                        zbuf[k], owner[k] = z, oi
                        rgb[3 * k : 3 * k + 3] = px
    report: dict[str, Any] = {"width": w, "height": h, "lights": len(lights), "objects": [], "overlaps": []}
    for oi, obj in enumerate(objects):
        lo, hi = aabb(obj)
        corners = [[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
        proj = [project(b, p) for p in corners]
        bx0, bx1 = min(p[0] for p in proj), max(p[0] for p in proj)
        by0, by1 = min(p[1] for p in proj), max(p[1] for p in proj)
        behind = any(p[2] <= 0.05 for p in proj)
        if behind or bx1 < 0 or by1 < 0 or bx0 > w or by0 > h:
            frame = "out of frame"
        elif bx0 < 0 or by0 < 0 or bx1 > w or by1 > h:
            frame = "partly out of frame"
        else:
            frame = "in frame"
        report["objects"].append(
            {
                "name": obj["name"],
                "type": obj["type"],
                "bbox": [round(bx0), round(by0), round(bx1), round(by1)],
                "frame": frame,
                "pixels": owner.count(oi),
                "bottom": round(lo[1], 3),
                "top": round(hi[1], 3),
            }
        )
    for i in range(len(objects)):
        for j in range(i + 1, len(objects)):
            (alo, ahi), (blo, bhi) = aabb(objects[i]), aabb(objects[j])
            depth = min(min(ahi[k], bhi[k]) - max(alo[k], blo[k]) for k in range(3))
            if depth > 1e-3:
                report["overlaps"].append([objects[i]["name"], objects[j]["name"], round(depth, 3)])
    return w, h, rgb, report


def png_bytes(w: int, h: int, rgb: bytes | bytearray, text: dict[str, str]) -> bytes:
    """An 8-bit RGB PNG with ``tEXt`` chunks."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + bytes(rgb[3 * w * y : 3 * w * (y + 1)]) for y in range(h))
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    for k, v in sorted(text.items()):
        out += chunk(b"tEXt", k.encode("latin-1") + b"\x00" + v.encode("latin-1"))
    return out + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "-o"]
    if len(args) != 2 or "-o" not in argv:
        print("usage: python3 render.py SCENE.json -o OUT.png", file=sys.stderr)
        return 2
    src, out = args
    with open(src, "rb") as f:
        data = f.read()
    try:
        scene = json.loads(data)
    except ValueError as exc:
        print(f"error: {src} is not valid JSON: {exc}", file=sys.stderr)
        return 1
    errs = validate(scene)
    if errs:
        print("error: " + "; ".join(errs), file=sys.stderr)
        return 1
    w, h, rgb, rep = render(scene)
    with open(out, "wb") as f:
        f.write(png_bytes(w, h, rgb, {"scene-sha256": hashlib.sha256(data).hexdigest()}))
    print(f"rendered {out}: {w}x{h}, {len(rep['objects'])} objects, {rep['lights']} lights")
    for o in rep["objects"]:
        x0, y0, x1, y1 = o["bbox"]
        print(
            f"  {o['name']} ({o['type']}): bbox x={x0}..{x1} y={y0}..{y1}, {o['pixels']} px visible, "
            f"{o['frame']}, spans y {o['bottom']}..{o['top']}"
        )
    for a, b, d in rep["overlaps"]:
        print(f"  overlap: {a} intersects {b} (by {d})")
    if not rep["overlaps"]:
        print("  no overlaps")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
