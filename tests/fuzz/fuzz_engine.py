"""Mutation fuzzing of every partplan reader (issue #53, part 2).

Each *target* writes one valid small file (or plan / chunked directory) of its
kind, picks the file a case mutates, calls the reader and checks what the
reader returned. A case is ``(reader, seed, index)``: its mutation comes from
``random.Random(f"{seed}:{reader}:{index}")``, so any case is replayed by
``python tests/fuzz/fuzz_engine.py replay READER SEED INDEX``.

Mutations: bit flips, truncations, byte insertions and deletions, little-endian
integer fields overwritten with edge values (0, -1, 2^31, 2^40, 2^63-1, ...),
spans swapped or duplicated, digit runs replaced by hostile numbers (npy
headers, Arrow and JSON metadata, text sizes); for text files line edits and
for JSON structure-aware edits (a value replaced, a key dropped, a list
emptied or grown). Plan shards and shares are re-signed in the manifest (size
and sha256, and a share's xxh3_128, as the writers do) in 3 cases of 4, so mutations get past
the checksum.

Outcome classes:

* ``refused`` — a PartplanError naming the file (or the directory it lies in);
* ``refused-unnamed`` — a PartplanError that names no file (a defect);
* ``accepted`` — the reader returned and its result's invariants hold;
* ``accepted-invalid`` — the reader returned something that breaks them;
* ``traceback`` — any other exception;
* ``hang`` — past the per-case time limit (in the worker: ``setitimer``;
  a hang inside C code is caught by the parent's watchdog);
* ``crash`` — the worker process died of a signal during the case.

Cases run in a worker process (``python tests/fuzz/fuzz_engine.py worker``) that
calls the readers in-process and streams one JSON line per case; the parent
(:func:`run`) restarts it after a crash or a hang at the next case. The worker
also measures each case's peak RSS above its start (``/proc/self/clear_refs``
then ``VmHWM``).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

N = int(os.environ.get("FUZZ_N", 40))   # vertices of the seed graphs (larger: the refusals' memory on larger files)
K = 2           # ranks / parts
CASE_LIMIT_S = 10.0
BUDGET = "256M"  # PARTPLAN_MAX_BYTES in the worker: a size beyond it is refused before allocation

CLASSES = ("refused", "refused-unnamed", "accepted", "accepted-invalid", "traceback", "hang", "crash")
BAD = ("refused-unnamed", "accepted-invalid", "traceback", "hang", "crash")


# ----------------------------------------------------------------------------- mutations
EDGE_INTS = [0, 1, -1, 2, 255, 0x7F, 0x80, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32, 1 << 40,
             (1 << 62), (1 << 63) - 1, -(1 << 63), -(1 << 31)]
HOSTILE_NUMBERS = [b"0", b"-1", b"1", b"2", b"99999999999999999999999999999", b"9223372036854775807",
                   b"9223372036854775808", b"-9223372036854775808", b"4294967296", b"1099511627776",
                   b"1e308", b"nan", b"inf", b"-0", b"0x10", b"1.5", b"", b"x", b"3" * 400]


def _bitflip(rng, b: bytearray) -> bytearray:
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    return b


def _truncate(rng, b: bytearray) -> bytearray:
    return b[:rng.randrange(len(b))]


def _insert(rng, b: bytearray) -> bytearray:
    i = rng.randrange(len(b) + 1)
    junk = bytes(rng.randrange(256) for _ in range(rng.choice([1, 4, 8, 64])))
    return b[:i] + junk + b[i:]


def _delete(rng, b: bytearray) -> bytearray:
    i = rng.randrange(len(b))
    return b[:i] + b[i + rng.randint(1, 64):]


def _intfield(rng, b: bytearray) -> bytearray:
    width = rng.choice([4, 8])
    if len(b) < width:
        return _bitflip(rng, b)
    i = rng.randrange(0, len(b) - width + 1)
    if rng.random() < 0.7:
        i -= i % width
    v = rng.choice(EDGE_INTS) & ((1 << (8 * width)) - 1)
    b[i:i + width] = v.to_bytes(width, "little")
    return b


def _swap(rng, b: bytearray) -> bytearray:
    if len(b) < 4:
        return _bitflip(rng, b)
    ln = rng.randint(1, max(1, len(b) // 4))
    i, j = rng.randrange(len(b) - ln + 1), rng.randrange(len(b) - ln + 1)
    lo, hi = sorted((i, j))
    if hi < lo + ln:
        return _bitflip(rng, b)
    return b[:lo] + b[hi:hi + ln] + b[lo + ln:hi] + b[lo:lo + ln] + b[hi + ln:]


def _dup(rng, b: bytearray) -> bytearray:
    i = rng.randrange(len(b))
    span = b[i:i + rng.randint(1, 256)]
    j = rng.randrange(len(b) + 1)
    return b[:j] + span + b[j:]


def _number(rng, b: bytearray) -> bytearray:
    runs = [m.span() for m in re.finditer(rb"-?\d+", bytes(b))]
    if not runs:
        return _intfield(rng, b)
    s, e = rng.choice(runs)
    return b[:s] + bytearray(rng.choice(HOSTILE_NUMBERS)) + b[e:]


BYTE_MUTATORS = [_bitflip, _truncate, _insert, _delete, _intfield, _swap, _dup, _number]


def _lines(rng, b: bytearray) -> bytearray:
    lines = bytes(b).split(b"\n")
    op = rng.randrange(6)
    i = rng.randrange(len(lines))
    if op == 0:
        del lines[i]
    elif op == 1:
        lines.insert(i, lines[rng.randrange(len(lines))])
    elif op == 2:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == 3:
        lines.insert(i, rng.choice([b"", b"%", b"% c", b"  ", b"\t", b"\x00", b"\xff\xfe", b"1 2 3 4 5 6 7"]))
    elif op == 4:
        toks = lines[i].split()
        if toks:
            toks[rng.randrange(len(toks))] = rng.choice(HOSTILE_NUMBERS)
        lines[i] = b" ".join(toks)
    else:
        lines = lines[:i] + [lines[i][:rng.randrange(len(lines[i]) + 1)]]
    return bytearray(b"\n".join(lines))


HOSTILE_JSON = [-1, 0, 1, 2, 2 ** 31, 2 ** 63, 2 ** 64, 10 ** 30, -(2 ** 63) - 1, 1e308, 1.5, float("nan"), True,
                False, None, "", "x", "../x", "\x1b[31m", "\ud800", [], {}, [1] * 50, {"a": 1}, [[[[[]]]]]]


def _json(rng, b: bytearray) -> bytearray:
    try:
        doc = json.loads(bytes(b))
    except ValueError:
        return _number(rng, b)
    slots = []

    def walk(o, depth=0):
        if isinstance(o, dict):
            for k in o:
                slots.append((o, k))
                walk(o[k], depth + 1)
        elif isinstance(o, list):
            for i in range(len(o)):
                slots.append((o, i))
                walk(o[i], depth + 1)
    walk(doc)
    if not slots:
        return _number(rng, b)
    for _ in range(rng.randint(1, 3)):
        parent, key = rng.choice(slots)
        op = rng.randrange(5)
        try:
            if op == 0:
                parent[key] = rng.choice(HOSTILE_JSON)
            elif op == 1:
                del parent[key]
            elif op == 2 and isinstance(parent[key], (int, float)) and not isinstance(parent[key], bool):
                parent[key] = rng.choice([parent[key] + 1, parent[key] - 1, -parent[key], parent[key] * 1000,
                                          2 ** 62])
            elif op == 3 and isinstance(parent[key], list):
                v = parent[key]
                parent[key] = rng.choice([[], v[:-1], v + v, v[::-1]])
            elif op == 4 and isinstance(parent[key], str):
                parent[key] = rng.choice(["", "x", parent[key] + "x", "rank-00000.arrow", "/etc/passwd", "..",
                                          "\x1b[31m"])
            else:
                parent[key] = rng.choice(HOSTILE_JSON)
        except (KeyError, IndexError, TypeError):
            pass
    return bytearray(json.dumps(doc, allow_nan=True).encode())


def _mutate_zip_member(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """One member of a zip (npz, torch .pt) mutated and the archive written again with
    valid CRC-32s, stored or deflated; sometimes a member dropped, renamed or added."""
    import io
    import zipfile
    src = zipfile.ZipFile(io.BytesIO(data))
    members = [(i.filename, src.read(i.filename)) for i in src.infolist()]
    j = rng.randrange(len(members))
    op = rng.random()
    name, body = members[j]
    if op < 0.08:
        del members[j]
        what = "zip-drop"
    elif op < 0.14:
        members[j] = (name + rng.choice(["x", ".npy", "/"]), body)
        what = "zip-rename"
    elif op < 0.18:
        members.append((rng.choice(["x.npy", "extra.npy", name]), body))
        what = "zip-add"
    else:
        body, what = mutate(rng, body, "text" if name.endswith(".npy") and rng.random() < 0.5 else "bytes")
        members[j] = (name, body)
        what = "zip-member:" + what
    out = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if rng.random() < 0.3 else zipfile.ZIP_STORED
    with zipfile.ZipFile(out, "w", method) as z:
        for nm, b in members:
            z.writestr(nm, b)
    return out.getvalue(), what + ("+deflated" if method == zipfile.ZIP_DEFLATED else "")


def mutate(rng: random.Random, data: bytes, kind: str) -> tuple[bytes, str]:
    """``data`` mutated 1-3 times; ``kind`` (bytes / text / json) adds the structure-aware edits."""
    b = bytearray(data)
    names = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if not b:
            b = bytearray(rng.choice([b"", b"\x00", b"0", b"{}"]))
            names.append("empty")
            continue
        pool = list(BYTE_MUTATORS)
        if kind == "text":
            pool += [_lines] * 6
        elif kind == "json":
            pool += [_json] * 8
        m = rng.choice(pool)
        names.append(m.__name__.lstrip("_"))
        b = m(rng, b)
    return bytes(b), "+".join(names)


# ----------------------------------------------------------------------------- seeds
def _graph(weighted=False):
    import numpy as np

    from partplan import Graph
    rng = np.random.default_rng(7)
    e = max(150, 4 * N)
    s, d = rng.integers(0, N, e), rng.integers(0, N, e)
    w = rng.integers(1, 5, e).astype(float) if weighted else None
    return Graph.from_edges(s, d, n=N, symmetrize=True, weights=w, name="f")


def _pyg_data():
    import torch
    from torch_geometric.data import Data
    g = torch.Generator().manual_seed(3)
    e = max(160, 4 * N)
    ei = torch.randint(0, N, (2, e), generator=g)
    return Data(edge_index=ei, num_nodes=N, x=torch.randn(N, 3, generator=g),
                y=torch.randint(0, 3, (N,), generator=g), train_mask=torch.rand(N, generator=g) < 0.5,
                edge_attr=torch.randn(e, 2, generator=g))


def _resign_share(plan: Path, rank: int, data: bytes) -> None:
    import xxhash
    from partplan.nn.shares import share_name
    (plan / share_name(rank)).write_bytes(data)
    m = json.loads((plan / "manifest.json").read_text())
    m["shares"]["files"][rank].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest(),
                                          xxh3_128=xxhash.xxh3_128_hexdigest(data))
    (plan / "manifest.json").write_text(json.dumps(m))


def _resign_plan_shard(plan: Path, rank: int, data: bytes) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from proctools import resign_shard
    resign_shard(plan, rank, data)


# ----------------------------------------------------------------------------- invariants
def _graph_ok(g) -> str | None:
    import numpy as np
    n = g.indptr.size - 1
    if g.indptr[0] != 0 or g.indptr[-1] != g.indices.size or np.any(np.diff(g.indptr) < 0):
        return "indptr not a CSR pointer"
    if g.indices.size and (g.indices.min() < 0 or g.indices.max() >= n):
        return "column id out of range"
    if g.data is not None and (g.data.shape != g.indices.shape or not np.all(np.isfinite(g.data))):
        return "edge weights not finite or not one per edge"
    if g.vertex_weights is not None and (g.vertex_weights.shape[0] != n):
        return "vertex weights not one per vertex"
    return None


def _hypergraph_ok(h) -> str | None:
    import numpy as np
    if h.net_ptr[0] != 0 or h.net_ptr[-1] != h.pins.size or np.any(np.diff(h.net_ptr) < 0):
        return "net_ptr not a pointer"
    if h.pins.size and (h.pins.min() < 0 or h.pins.max() >= h.n):
        return "pin out of range"
    return None


def _part_ok(part) -> str | None:
    import numpy as np
    if not isinstance(part, np.ndarray) or part.dtype != np.int64 or part.shape != (N,):
        return f"partition is {getattr(part, 'dtype', type(part))} {getattr(part, 'shape', '')}, not int64[{N}]"
    if part.size and part.min() < 0:
        return "negative part id"
    return None


def _rankplan_ok(rp) -> str | None:
    if getattr(rp, "problems", None):
        return f"returned with problems {rp.problems[:1]}"
    return None


def _plan_ok(res) -> str | None:
    import numpy as np
    plan, shares = res
    for sh in shares:
        bad = _share_ok(sh)
        if bad:
            return bad
    if plan.part.shape != (plan.manifest["graph"]["n"],) or (plan.part.size and (
            plan.part.min() < 0 or plan.part.max() >= plan.manifest["k"])):
        return "partition out of range"
    for rp in plan.ranks:
        if getattr(rp, "problems", None):
            return "a rank with problems"
    return None if np.all(np.isfinite([0])) else "?"


def _share_ok(out) -> str | None:
    L, H = out["local_ids"].size, out["halo_in_degree"].size
    ei = out["edge_index"]
    if ei.size and (ei.min() < 0 or ei[0].max() >= L + H or ei[1].max() >= L):
        return "edge_index out of range"
    for name, t in out["node"].items():
        if t.shape[0] != L:
            return f"node field {name} rows"
    for name, t in out["edge"].items():
        if t.shape[0] != ei.shape[1]:
            return f"edge field {name} rows"
    return None


def _data_ok(res) -> str | None:
    info, rows = res
    if info.n != N:
        return f"n = {info.n}"
    for k, a in rows.items():
        if a.shape[0] != 3:
            return f"{k}: {a.shape[0]} rows for 3 ids"
    return None


# ----------------------------------------------------------------------------- targets
@dataclass
class Target:
    name: str
    build: Callable[[Path], Path]            # writes the seed under a folder; returns the reader's path
    read: Callable[[Path], Any]
    check: Callable[[Any], str | None]
    kind: str = "bytes"                      # bytes / text / json
    victims: Callable[[Path], list] = field(default=lambda p: [p])   # files a case may mutate
    resign: Callable[[Path, Path, bytes], None] | None = None        # (path, victim, data)


def _plan_dir(d: Path) -> Path:
    import partplan
    partplan.plan_from_pyg(_pyg_data(), K, out=d / "g.plan", shares=True)
    return d / "g.plan"


def _load_shard(p: Path):
    from partplan.plan import load_plan
    return load_plan(p, rank=1)


def _load_whole(p: Path):
    """The whole plan, then every rank's share (the manifest's ``shares`` section is read there)."""
    from partplan.nn.shares import read_share
    from partplan.plan import load_plan
    plan = load_plan(p)
    return plan, [read_share(p, r, manifest=plan.manifest) for r in range(plan.manifest["ranks"])]


def _read_share(p: Path):
    from partplan.nn.shares import read_share
    return read_share(p, 1)


def _shard_resign(p: Path, victim: Path, data: bytes) -> None:
    _resign_plan_shard(p, int(victim.stem.split("-")[1]), data)


def _share_resign(p: Path, victim: Path, data: bytes) -> None:
    _resign_share(p, int(victim.stem.split("-")[1]), data)


def _seed_npy(d):
    import numpy as np

    from partplan.io.partfile import write_partition
    return write_partition(np.arange(N) % K, d / "p.npy")


def _seed_parttext(d):
    import numpy as np

    from partplan.io.partfile import write_partition
    return write_partition(np.arange(N) % K, d / f"g.part.{K}")


def _seed_partparquet(d):
    import numpy as np

    from partplan.io.partfile import write_partition
    return write_partition(np.arange(N) % K, d / "p.parquet")


def _read_part(p):
    from partplan.io.partfile import read_partition
    return read_partition(p, N)


def _seed_chunked(d):
    from partplan.io.chunked import write_chunked
    return write_chunked(_graph(weighted=True), d / "g.chunks", chunks=2)


def _read_chunked(p):
    from partplan.io.chunked import read_chunked
    return read_chunked(p)


def _seed_graph(suffix, weighted=False):
    def build(d):
        from partplan.io import write_graph
        g = _graph(weighted=weighted)
        if suffix == "graph":
            g = g.normalize(self_loops="remove")
        return write_graph(g, d / f"g.{suffix}")
    return build


def _read_graph(p):
    from partplan.io import read_graph
    return read_graph(p)


def _seed_pt(d):
    import torch
    torch.save(_pyg_data(), d / "g.pt")
    return d / "g.pt"


def _seed_hgr(d):
    import numpy as np

    from partplan.hypergraph import Hypergraph
    from partplan.io.hgr import write_hypergraph
    rng = np.random.default_rng(2)
    m = max(20, N // 2)
    sizes = rng.integers(2, 5, m)
    pins = rng.integers(0, N, int(sizes.sum()))
    hg = Hypergraph(net_ptr=np.concatenate([[0], np.cumsum(sizes)]), pins=pins, n=N,
                    net_weights=rng.integers(1, 4, m), vertex_weights=None)
    return write_hypergraph(hg, d / "h.hgr")


def _read_hgr(p):
    from partplan.io.hgr import read_hypergraph
    return read_hypergraph(p)


def _seed_data(d):
    import numpy as np

    from partplan.nn.data import write_data
    rng = np.random.default_rng(4)
    split = rng.integers(0, 4, N)   # train / val / test masks are disjoint
    return write_data(d / "d.npz", rng.standard_normal((N, 5)).astype(np.float32), rng.integers(0, 3, N),
                      split == 0, split == 1, split == 2)


def _read_data(p):
    import numpy as np

    from partplan.nn.data import check_data, read_rows
    info = check_data(p, N)
    return info, read_rows(p, np.array([0, 5, N - 1]))


def _chunk_victims(p: Path) -> list:
    return sorted(x for x in p.iterdir() if x.is_file())


TARGETS = {
    "shard": Target("shard", _plan_dir, _load_shard, _rankplan_ok,
                    victims=lambda p: [p / "rank-00001.arrow"], resign=_shard_resign),
    "manifest": Target("manifest", _plan_dir, _load_whole, _plan_ok, kind="json",
                       victims=lambda p: [p / "manifest.json"]),
    "share": Target("share", _plan_dir, _read_share, _share_ok,
                    victims=lambda p: [p / "share-00001.arrow"], resign=_share_resign),
    "part-npy": Target("part-npy", _seed_npy, _read_part, _part_ok),
    "part-text": Target("part-text", _seed_parttext, _read_part, _part_ok, kind="text"),
    "part-parquet": Target("part-parquet", _seed_partparquet, _read_part, _part_ok),
    "chunked": Target("chunked", _seed_chunked, _read_chunked, _graph_ok, victims=_chunk_victims),
    "pt": Target("pt", _seed_pt, _read_graph, _graph_ok),
    "npz": Target("npz", _seed_graph("npz"), _read_graph, _graph_ok),
    "data-npz": Target("data-npz", _seed_data, _read_data, _data_ok),
    "parquet": Target("parquet", _seed_graph("parquet"), _read_graph, _graph_ok),
    "metis": Target("metis", _seed_graph("graph", weighted=True), _read_graph, _graph_ok, kind="text"),
    "mtx": Target("mtx", _seed_graph("mtx", weighted=True), _read_graph, _graph_ok, kind="text"),
    "hgr": Target("hgr", _seed_hgr, _read_hgr, _hypergraph_ok, kind="text"),
}


# ----------------------------------------------------------------------------- one case
class _Hang(BaseException):
    """The per-case time limit (a BaseException: a reader's ``except Exception`` does not swallow it)."""


def _on_alarm(signum, frame):
    raise _Hang()


def _rss_reset() -> int:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return _status_kb("VmRSS")


def _status_kb(key: str) -> int:
    try:
        for ln in Path("/proc/self/status").read_text().splitlines():
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    except OSError:
        pass
    return 0


class Bench:
    """The seeds of every target, built once under ``root``."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.seeds: dict[str, Path] = {}

    def seed(self, name: str) -> Path:
        if name not in self.seeds:
            d = self.root / "seed" / name
            d.mkdir(parents=True, exist_ok=True)
            self.seeds[name] = TARGETS[name].build(d)
        return self.seeds[name]


def prepare(bench: Bench, name: str, seed: int, index: int) -> tuple[Path, Path, str, int]:
    """Case ``index``: the mutated copy of the seed under ``bench.root/case``; (path, victim, what, size)."""
    t = TARGETS[name]
    src = bench.seed(name)
    rng = random.Random(f"{seed}:{name}:{index}")
    case = bench.root / "case"
    if case.exists():
        shutil.rmtree(case)
    case.mkdir()
    dst = case / src.name
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)
    victims = t.victims(dst)
    victim = rng.choice(victims)
    raw = victim.read_bytes()
    if raw[:4] == b"PK\x03\x04" and rng.random() < 0.6:
        data, what = _mutate_zip_member(rng, raw)   # past the zip's CRC-32s, as re-signing is past sha256
    else:
        data, what = mutate(rng, raw, "json" if victim.suffix == ".json" else t.kind)
    if t.resign is not None and rng.random() < 0.75:
        t.resign(dst, victim, data)
        what += "+resigned"
    else:
        victim.write_bytes(data)
    return dst, victim, what, len(data)


def classify(name: str, path: Path, victim: Path, limit: float = CASE_LIMIT_S) -> tuple[str, str]:
    from partplan.errors import PartplanError
    t = TARGETS[name]
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        try:
            res = t.read(path)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Hang:
        return "hang", f"past {limit:g} s"
    except PartplanError as exc:
        msg = str(exc)
        named = victim.name in msg or path.name in msg or str(path) in msg
        return ("refused" if named else "refused-unnamed"), msg[:300]
    except Exception as exc:  # noqa: BLE001 - the point: any other exception is a finding
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
        return "traceback", f"{type(exc).__name__}: {str(exc)[:200]} @ {where}"
    finally:
        signal.signal(signal.SIGALRM, old)
    try:
        bad = t.check(res)
    except Exception as exc:  # noqa: BLE001
        bad = f"invariant check raised {type(exc).__name__}: {exc}"
    return ("accepted-invalid", bad) if bad else ("accepted", "")


def run_case(bench: Bench, name: str, seed: int, index: int) -> dict:
    path, victim, what, size = prepare(bench, name, seed, index)
    base = _rss_reset()
    t0 = time.perf_counter()
    cls, detail = classify(name, path, victim)
    return {"reader": name, "index": index, "class": cls, "detail": detail, "mutation": what,
            "victim": victim.name, "bytes": size, "seconds": round(time.perf_counter() - t0, 4),
            "peak_kb": max(_status_kb("VmHWM") - base, 0)}


# ----------------------------------------------------------------------------- worker and parent
def _worker(args: list[str]) -> None:
    """``worker SEED ROOT`` then lines ``READER START STOP`` on stdin: one JSON line per case on stdout."""
    seed, root = int(args[0]), Path(args[1])
    os.environ["PARTPLAN_MAX_BYTES"] = os.environ.get("FUZZ_MAX_BYTES", BUDGET)
    # address space: what is mapped now + FUZZ_AS_HEADROOM (default 4 GiB), so an allocation sized by a
    # hostile header is a MemoryError (a traceback finding), never the machine's memory
    import resource
    head = int(float(os.environ.get("FUZZ_AS_HEADROOM", 4 << 30)))
    if head > 0:
        resource.setrlimit(resource.RLIMIT_AS, (_status_kb("VmSize") * 1024 + head, resource.RLIM_INFINITY))
    import warnings
    warnings.simplefilter("ignore")
    bench = Bench(root)
    out = sys.stdout
    sys.stdout = sys.stderr   # a reader's prints never mix with the results
    for line in sys.stdin:
        name, start, stop = line.split()
        try:
            bench.seed(name)
        except Exception as exc:  # noqa: BLE001 - the seed itself could not be written: stop the run
            out.write(json.dumps({"seed_error": f"{name}: {type(exc).__name__}: {exc}"}) + "\n")
            out.flush()
            return
        kill_at = os.environ.get("FUZZ_KILL_AT", "")   # "READER:INDEX": the engine's own crash test
        for i in range(int(start), int(stop)):
            out.write(json.dumps({"start": i}) + "\n")
            out.flush()
            if kill_at == f"{name}:{i}":
                os.kill(os.getpid(), signal.SIGSEGV)
            out.write(json.dumps(run_case(bench, name, seed, i)) + "\n")
            out.flush()
        out.write(json.dumps({"done": name}) + "\n")
        out.flush()


@dataclass
class Report:
    cases: dict = field(default_factory=dict)        # reader -> {class: count}
    findings: list = field(default_factory=list)      # dicts of the bad cases
    refusal_peak: dict = field(default_factory=dict)  # reader -> (peak_kb, bytes) of the largest refusal peak
    seconds: dict = field(default_factory=dict)
    over_goal: list = field(default_factory=list)     # refusals whose peak RSS passed 2 x file + 200 MiB

    def add(self, r: dict) -> None:
        c = self.cases.setdefault(r["reader"], {k: 0 for k in CLASSES})
        c[r["class"]] += 1
        if r["class"] in BAD:
            self.findings.append(r)
        if r["class"].startswith("refused") and r.get("peak_kb", 0) > self.refusal_peak.get(r["reader"], (0, 0))[0]:
            self.refusal_peak[r["reader"]] = (r["peak_kb"], r["bytes"])
        if r["class"].startswith("refused") and r.get("peak_kb", 0) * 1024 > 2 * r["bytes"] + (200 << 20):
            self.over_goal.append(r)

    def table(self) -> str:
        rows = [f"{'reader':<14}{'cases':>7}" + "".join(f"{c:>18}" for c in CLASSES) + f"{'max refusal RSS':>18}"]
        for name, c in self.cases.items():
            pk = self.refusal_peak.get(name, (0, 0))
            rows.append(f"{name:<14}{sum(c.values()):>7}" + "".join(f"{c[k]:>18}" for k in CLASSES)
                        + f"{pk[0] / 1024:>14.1f} MiB")
        return "\n".join(rows)


def run(readers: list[str], seed: int, cases: int, *, root: Path | None = None, case_limit: float = CASE_LIMIT_S,
        progress: Callable[[dict], None] | None = None, only: list[tuple[str, int]] | None = None) -> Report:
    """Run cases ``[0, cases)`` of each reader in worker processes (or the cases ``only`` lists,
    as (reader, index)); a crash or a hang ends the worker, which restarts at the next case."""
    own = root is None
    root = Path(tempfile.mkdtemp(prefix="partplan-fuzz-")) if own else Path(root)
    rep = Report()
    here = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    try:
        todo = [(r, 0, cases) for r in readers] if only is None else [(r, i, i + 1) for r, i in only]
        proc = None
        while todo:
            name, start, stop = todo.pop(0)
            if start >= stop:
                continue
            if proc is None:
                proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "worker", str(seed),
                                         str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=False, bufsize=0, cwd=here,
                                        env=env)
            proc.stdin.write(f"{name} {start} {stop}\n".encode())
            proc.stdin.flush()
            t0 = time.monotonic()
            current, died = None, None
            while True:
                line = _readline(proc, case_limit * 3 + 120 if current is None else case_limit + 30)
                if line is None:   # watchdog: a hang inside C code, or a dead worker
                    try:   # an abort may take a moment to end the process (a core dump)
                        proc.wait(timeout=0 if getattr(proc, "_fuzz_eof", False) is False else 30)
                    except subprocess.TimeoutExpired:
                        pass
                    died = "hang" if proc.poll() is None else "crash"
                    break
                msg = json.loads(line)
                if "seed_error" in msg:
                    raise RuntimeError(f"fuzz seed not written: {msg['seed_error']}")
                if "start" in msg:
                    current = msg["start"]
                elif "done" in msg:
                    break
                else:
                    rep.add(msg)
                    if progress:
                        progress(msg)
                    current = None
            rep.seconds[name] = rep.seconds.get(name, 0.0) + time.monotonic() - t0
            if died:
                rc = proc.poll()
                if rc is None:
                    proc.kill()
                    rc = proc.wait()
                r = {"reader": name, "index": current, "class": died, "bytes": 0,
                     "detail": f"worker {'killed after the watchdog' if died == 'hang' else 'died'}: rc {rc}"}
                rep.add(r)
                if progress:
                    progress(r)
                proc = None
                if current is not None:
                    todo.insert(0, (name, current + 1, stop))
        if proc is not None:
            proc.stdin.close()
            proc.wait(timeout=60)
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)
    return rep


def _readline(proc, timeout: float) -> str | None:
    """The worker's next line within ``timeout`` seconds (None: none came, or it ended). Reads the
    pipe itself: a buffered reader could hold lines that ``select`` no longer sees."""
    import select
    buf = proc._fuzz_buf = getattr(proc, "_fuzz_buf", b"")
    end = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    while b"\n" not in buf:
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            proc._fuzz_buf = buf
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            proc._fuzz_buf, proc._fuzz_eof = buf, True
            return None
        buf += chunk
    line, _, proc._fuzz_buf = buf.partition(b"\n")
    return line.decode()


def replay(name: str, seed: int, index: int) -> dict:
    """One case in this process, with the traceback printed when it has one."""
    os.environ.setdefault("PARTPLAN_MAX_BYTES", BUDGET)
    with tempfile.TemporaryDirectory() as d:
        bench = Bench(Path(d))
        path, victim, what, size = prepare(bench, name, seed, index)
        print(f"{name} case {index}: {what} on {victim.name} ({size} bytes)")
        try:
            res = TARGETS[name].read(path)
            print("accepted; invariants:", TARGETS[name].check(res) or "hold")
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        return run_case(bench, name, seed, index)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "worker":
        _worker(argv[1:])
        return 0
    if argv and argv[0] == "replay":
        print(json.dumps(replay(argv[1], int(argv[2]), int(argv[3])), indent=1))
        return 0
    import argparse
    ap = argparse.ArgumentParser(prog="tests/fuzz/fuzz_engine.py")
    ap.add_argument("--cases", type=int, default=int(os.environ.get("FUZZ_CASES", 10000)))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED", 0)))
    ap.add_argument("--readers", nargs="*", default=list(TARGETS))
    ap.add_argument("--json", help="write the report (counts, findings) here")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    rep = run(a.readers, a.seed, a.cases)
    print(rep.table())
    by = {}
    for f in rep.findings:
        key = (f["reader"], f["class"], re.sub(r"\d+", "N", f["detail"])[:120])
        by.setdefault(key, []).append(f["index"])
    for (r, c, d), idx in sorted(by.items()):
        print(f"  {r} {c} x{len(idx)} (e.g. case {idx[0]}): {d}")
    worst = [(pk / 1024, b / 2 ** 20, r) for r, (pk, b) in rep.refusal_peak.items()]
    if worst:
        mib, size, r = max(worst)
        print(f"refusals: largest peak RSS above the case's start {mib:.1f} MiB ({r}, file {size:.2f} MiB); "
              f"goal <= 2 x file + 200 MiB; {len(rep.over_goal)} refusal(s) above it")
        for r in rep.over_goal[:5]:
            print(f"  over the goal: {r['reader']} case {r['index']}: {r['peak_kb'] / 1024:.0f} MiB for "
                  f"{r['bytes']} bytes: {r['detail'][:100]}")
    print(f"{sum(sum(c.values()) for c in rep.cases.values())} cases in {time.monotonic() - t0:.0f} s, seed {a.seed}")
    if a.json:
        Path(a.json).write_text(json.dumps({"cases": rep.cases, "findings": rep.findings,
                                            "refusal_peak_kb": rep.refusal_peak}, indent=1))
    return 1 if rep.findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
