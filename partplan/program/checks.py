"""Structure checks of a plan's manifest and shards: every step field and
descriptive field by type (:func:`check_steps`, :func:`check_fields`) and every
shard's arrays against the manifest (:func:`shard_problems`). The store runs them
when it reads a plan, ``validate`` and the runtime report what they find."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import PartitionError, PlanError
from ..io.trust import plain_name_problem, printable
from .schema import PARTITION_FILE, shard_name
from .steps import STEPS

# a step's fields by kind come from the step registry (partplan.program.steps: Step.fields /
# Step.optional); kinds: "buf" (a buffer name), "row" (int >= 0 or a buffer name), "bool";
# "group" is checked against the layout's families by the store
STEP_KNOWN = {"id", "op", "arrays", "pairs"}


BACKWARD_MODES = {"separate", "same-as-forward", "not-planned"}


PROGRAMS = ("forward", "backward")


_INT64_MAX = (1 << 63) - 1


from ..metrics.cost import MAX_WIDTH as MAX_F  # noqa: E402  (feature columns a plan may be costed for)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -_INT64_MAX <= v <= _INT64_MAX


def _count(v) -> bool:
    """An int in [0, 2^63): a size or count a manifest records."""
    return _int(v) and v >= 0


def _pairs_array(pairs) -> np.ndarray | None:
    """A step's ``pairs`` as int64 (P, 3), or None unless it is a list of lists of three ints
    (bools excluded) within int64. Type checks run over the entries at C speed (``map`` over
    ``type``): a manifest holds up to k² pairs."""
    import itertools
    if not isinstance(pairs, list):
        return None
    if pairs and (set(map(type, pairs)) != {list} or set(map(len, pairs)) != {3}):
        return None
    flat = list(itertools.chain.from_iterable(pairs))
    if flat and set(map(type, flat)) != {int}:
        return None
    try:
        return np.array(flat, dtype=np.int64).reshape(-1, 3)
    except OverflowError:
        return None


def _is(kind: str, v) -> bool:
    if kind == "buf":
        return isinstance(v, str) and v != ""
    if kind == "row":
        return (_int(v) and v >= 0) or (isinstance(v, str) and v != "")
    return isinstance(v, bool)


_KIND_WORDS = {"buf": "a non-empty name", "row": "a row offset >= 0 or a buffer name", "bool": "true or false"}


def check_steps(m: dict, mf: Path) -> None:
    """Program and step fields by type (before anything indexes with them)."""
    progs = m["programs"]
    for name in progs:
        if name not in PROGRAMS:
            raise PlanError(f"{mf}: field 'programs.{name}' is no program ({', '.join(PROGRAMS)})")
        pr = progs[name]
        if not isinstance(pr, dict):
            raise PlanError(f"{mf}: field 'programs.{name}' must be an object")
        if "same_as" in pr:
            if not isinstance(pr["same_as"], str):
                raise PlanError(f"{mf}: field 'programs.{name}.same_as' must be a program name")
            continue
        if not isinstance(pr.get("steps"), list):
            raise PlanError(f"{mf}: field 'programs.{name}.steps' must be a list")
        for i, st in enumerate(pr["steps"]):
            where = f"programs.{name}.steps[{i}]"
            if not isinstance(st, dict):
                raise PlanError(f"{mf}: field '{where}' must be an object")
            op = st.get("op")
            if not isinstance(op, str) or op not in STEPS:
                raise PlanError(f"{mf}: field '{where}.op' = {op!r} is not a known step ({', '.join(STEPS)})")
            arrs = st.get("arrays")
            if not isinstance(arrs, list) or not all(isinstance(a, str) for a in arrs):
                raise PlanError(f"{mf}: field '{where}.arrays' must be a list of array names")
            fields = {**STEPS[op].fields, **STEPS[op].optional}  # the registry as it is now (ops added later too)
            for key, kind in fields.items():
                if key not in st:
                    if key in STEPS[op].fields:
                        raise PlanError(f"{mf}: field '{where}.{key}' is missing (op {op!r} needs it)")
                    continue
                if not _is(kind, st[key]):
                    raise PlanError(f"{mf}: field '{where}.{key}' = {st[key]!r} must be {_KIND_WORDS[kind]}")
            extra = set(st) - set(fields) - STEP_KNOWN
            if extra:
                raise PlanError(f"{mf}: field '{where}' has unknown key(s) {', '.join(sorted(extra))} for op {op!r}")
            if STEPS[op].pairs:
                a = _pairs_array(st.get("pairs"))
                n = m["graph"]["n"]
                if a is None or (a.size and not (int(a[:, 2].min()) > 0 and int(a[:, 2].max()) <= n)):
                    raise PlanError(f"{mf}: field '{where}.pairs' must list [src rank, dst rank, rows] with "
                                    f"0 < rows <= n = {n}")


def check_fields(m: dict, mf: Path, parse_layout) -> None:
    """Descriptive fields by type and against each other; file names of shards.

    ``parse_layout(spec, ranks)`` is the layouts' parser (the caller's: the format
    layer knows no layout), which raises on a spec it does not know."""
    from ..metrics.cost import dtype_bytes

    g = m["graph"]
    if g["n"] < 0 or g["nnz"] < 0:
        raise PlanError(f"{mf}: fields 'graph.n' / 'graph.nnz' must be >= 0")
    for key in ("directed", "symmetric", "weighted"):
        if key in g and not isinstance(g[key], bool):
            raise PlanError(f"{mf}: field 'graph.{key}' must be true or false, got {g[key]!r}")
    if "name" in g and g["name"] is not None:
        why = plain_name_problem(g["name"])
        if why:  # it names exported files (export --to dgl): a path here would write outside the output
            raise PlanError(f"{mf}: field 'graph.name' = {printable(repr(g['name']))[:80]} {why}")
    lay = parse_layout(m["layout"], m["ranks"])
    for key in ("layout_params", "f", "dtype", "row_bytes", "backward", "ownership"):
        if key not in m:
            raise PlanError(f"{mf}: required field {key!r} is missing")
    if m["layout_params"] != lay.params:
        raise PlanError(f"{mf}: field 'layout_params' = {m['layout_params']!r} differs from layout "
                        f"{lay.spec}'s {lay.params!r}")
    f = m.get("f")
    if not _int(f) or not 1 <= f <= MAX_F:
        raise PlanError(f"{mf}: field 'f' must be an integer in [1, {MAX_F}], got {f!r}")
    try:
        isz = dtype_bytes(m.get("dtype"))
    except (ValueError, TypeError, KeyError):
        raise PlanError(f"{mf}: field 'dtype' = {m.get('dtype')!r} is not a known element type") from None
    if m.get("row_bytes") != f * isz:
        raise PlanError(f"{mf}: field 'row_bytes' = {m.get('row_bytes')!r} but f × size of {m['dtype']!r} = "
                        f"{f * isz}")
    for key in ("model", "backend", "objective", "created"):
        if m.get(key) is not None and not isinstance(m[key], str):
            raise PlanError(f"{mf}: field {key!r} must be a string, got {m[key]!r}")
    if m.get("seed") is not None and not _int(m["seed"]):
        raise PlanError(f"{mf}: field 'seed' must be an integer, got {m['seed']!r}")
    for key in ("params", "tool"):
        if key in m and not isinstance(m[key], dict):
            raise PlanError(f"{mf}: field {key!r} must be an object, got {type(m[key]).__name__}")
    if "columns_sorted_within_rows" in m and not isinstance(m["columns_sorted_within_rows"], bool):
        raise PlanError(f"{mf}: field 'columns_sorted_within_rows' must be true or false")
    own = m.get("ownership", "conformal")
    if own not in ("conformal", "decoupled"):
        raise PlanError(f"{mf}: field 'ownership' = {own!r} must be 'conformal' or 'decoupled'")
    progs = m["programs"]
    bmode = m.get("backward")
    want = ("separate" if "backward" in progs and "same_as" not in progs["backward"] else
            "same-as-forward" if "backward" in progs else "not-planned")
    if bmode != want:
        raise PlanError(f"{mf}: field 'backward' = {bmode!r} but the programs make it {want!r}")
    for key in ("stats", "stats_backward"):
        st = m.get(key)
        if key == "stats" or st is not None:
            if not isinstance(st, dict) or not all(
                    isinstance(v, (int, float, str, list)) or v is None for v in st.values()):
                raise PlanError(f"{mf}: field {key!r} must be an object of figures")
    if ("stats_backward" in m) != (want == "separate"):
        raise PlanError(f"{mf}: field 'stats_backward' must be present exactly when the backward program is separate")
    for i, e in enumerate(m["shards"]):
        if e.get("file") != shard_name(i):
            raise PlanError(f"{mf}: field 'shards[{i}].file' = {e.get('file')!r}, expected {shard_name(i)!r}")
    if m["partition_file"].get("file") != PARTITION_FILE:
        raise PlanError(f"{mf}: field 'partition_file.file' = {m['partition_file'].get('file')!r}, "
                        f"expected {PARTITION_FILE!r}")


# ----------------------------------------------------------------------------- one rank's shard
def _int_array(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


# id(a step's pairs list) -> (that list, its index), built once per step and read by every rank's
# check; the last few steps are kept (about one plan's pairs: a plan has a few steps per program)
_PAIR_INDEX: dict = {}
_PAIR_INDEX_STEPS = 16


def _pair_index(pairs: list) -> tuple:
    """A step's manifest ``pairs`` (checked [src, dst, rows] ints) as two sorted views: by source
    (sources, their destinations, rows) and by destination (destinations, sources, rows)."""
    hit = _PAIR_INDEX.get(id(pairs))
    if hit is not None and hit[0] is pairs:
        return hit[1]
    a = _pairs_array(pairs)     # the manifest checks' conversion (a checked manifest's pairs always convert)
    if a is None:
        a = np.asarray(pairs, dtype=np.int64).reshape(-1, 3)
    views = []
    for key, other in ((0, 1), (1, 0)):
        o = np.argsort(a[:, key], kind="stable")
        views.append((a[o, key], a[o, other], a[o, 2]))
    if len(_PAIR_INDEX) >= _PAIR_INDEX_STEPS:      # the oldest index goes first
        _PAIR_INDEX.pop(next(iter(_PAIR_INDEX)))
    _PAIR_INDEX[id(pairs)] = (pairs, views)
    return views


def pairs_of(st: dict, rank: int, members: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(rows ``rank`` sends to each member, rows it receives from each) in
    group-rank order, from the manifest's ``pairs`` (no p × p matrix; the
    pairs are indexed once per step, so every rank's call reads its own: a
    step's pairs list is read once, and not again if changed in place)."""
    mem = np.asarray(members, dtype=np.int64)
    order = np.argsort(mem, kind="stable")
    sorted_mem = mem[order]
    out = []
    for keys, others, rows in _pair_index(st.get("pairs", [])):
        lo, hi = np.searchsorted(keys, [rank, rank + 1])
        peer, cnt = others[lo:hi], rows[lo:hi]
        at = np.minimum(np.searchsorted(sorted_mem, peer), max(mem.size - 1, 0))
        ok = sorted_mem[at] == peer if mem.size else np.zeros(peer.size, dtype=bool)
        counts = np.zeros(mem.size, dtype=np.int64)
        np.add.at(counts, order[at[ok]], cnt[ok])
        out.append(counts)
    return out[0], out[1]


def shard_problems(m: dict, rp, *, pairs: bool = True, layout=None) -> list[str]:
    """Structure problems of one rank's shard ``rp`` (a :class:`RankPlan`)
    against the manifest ``m`` — what ``partplan validate`` reports as its
    ``structure`` check, run by every reader before it indexes:

    * every array is 1-D, index arrays integers, ``*.data`` floats;
    * the shard's program prefixes are the manifest's; ``in`` / ``out``
      buffers are as long as ``in_ids`` / ``out_ids``, whose ids lie in
      ``[0, graph.n)``;
    * every alltoallv step has one count per group member, each in
      ``[0, bound]``, and (``pairs``) equal to the manifest's pairs for this
      rank. ``pairs=False`` leaves that equality to the executor, whose
      start-up check compares counts with the pairs on every rank and stops
      every rank with the same error (one rank failing alone at load time
      would leave its peers waiting in the first collective); the sizes below
      are bounded by the manifest's pairs either way;
    * every buffer has at most as many rows as the shard's arrays and the
      received rows can fill (a buffer of 2^40 rows in a small shard is
      refused before anything is allocated);
    * each step op's own check (:func:`partplan.program.steps.structure_problems`:
      indices inside their buffers, CSR pointers, counts fitting).

    With ``layout`` (the plan's :class:`~partplan.layouts.base.Layout`) each program's
    ``writes_output`` is its ``writes_output(rank)``: a rank that wrote no output where the
    layout says it does left its rows of Z unwritten.

    Returns problem strings naming the field (empty: the shard is safe to
    index with). Cost: one pass over each array, O(pairs) over the manifest."""
    from .plan import program_steps
    from .steps import AllToAllV, step_op, structure_problems

    n, rank = int(m["graph"]["n"]), int(rp.rank)
    probs: list[str] = []
    held = 0
    for name, a in rp.arrays.items():
        held += int(a.size)
        if a.ndim != 1:
            probs.append(f"field {name!r} is not a 1-D array")
        elif name.endswith(".data"):
            if a.dtype.kind != "f":
                probs.append(f"field {name!r} holds {a.dtype}, not float values")
        elif not _int_array(a):
            probs.append(f"field {name!r} holds {a.dtype}, not integer indices")
    if probs:
        return probs
    families = {}
    for g in m["groups"]:
        if rank in g["ranks"]:
            families.setdefault(g["name"].split(".", 1)[0], list(g["ranks"]))
    for prog in m["programs"]:
        pm = rp.meta["programs"].get(prog)
        pr = m["programs"][prog]
        want_prefix = m["programs"][pr["same_as"]]["prefix"] if "same_as" in pr else pr["prefix"]
        if not isinstance(pm, dict) or pm.get("prefix") != want_prefix:
            probs.append(f"metadata field 'programs.{prog}.prefix' is not the manifest's {want_prefix!r}")
            continue
        if not isinstance(pm.get("writes_output"), bool):
            probs.append(f"metadata field 'programs.{prog}.writes_output' must be true or false")
        elif layout is not None and pm["writes_output"] != layout.writes_output(rank):
            probs.append(f"metadata field 'programs.{prog}.writes_output' is {str(pm['writes_output']).lower()}: "
                         f"in a {m.get('layout')} plan rank {rank}'s rows are "
                         f"{'' if layout.writes_output(rank) else 'not '}the copy written to the output")
        bufs = pm["buffers"]
        for key, buf in (("in_ids", "in"), ("out_ids", "out")):
            ids = rp.arrays[f"{want_prefix}.{key}"]
            if bufs.get(buf) != ids.size:
                probs.append(f"metadata field 'programs.{prog}.buffers.{buf}' = {bufs.get(buf)!r} but field "
                             f"'{want_prefix}.{key}' holds {ids.size} ids")
            elif ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
                probs.append(f"field '{want_prefix}.{key}' holds ids outside [0, graph.n = {n})")
            elif ids.size > 1 and not bool(np.all(ids[1:] > ids[:-1])):    # plan-format.md: ascending
                probs.append(f"field '{want_prefix}.{key}' is not strictly ascending")
        # the received rows' ids (validation, the traversals' ext ids) and the SpMM rows' global ids
        for key, ids in rp.arrays.items():
            if key.startswith(f"{want_prefix}.") and key.endswith((".recv_ids", ".row_ids")) and ids.size \
                    and (int(ids.min()) < 0 or int(ids.max()) >= n):
                probs.append(f"field {key!r} holds ids outside [0, graph.n = {n})")
        if probs:
            return probs
        steps = program_steps(m, prog)
        received = 0
        for st in steps:
            if step_op(st) is not AllToAllV:
                continue
            sid = st["id"]
            sc, rc = rp.arrays[f"{sid}.send_counts"], rp.arrays[f"{sid}.recv_counts"]
            members = families.get(st["group"])
            if members is None:
                if sc.size or rc.size:
                    probs.append(f"fields '{sid}.send_counts' / '{sid}.recv_counts': rank {rank} is in no group "
                                 f"of family {st['group']!r} but has counts")
                continue
            want_s, want_r = pairs_of(st, rank, members)
            cap = held + int(want_r.sum()) + int(want_s.sum())
            for nm, c, want in ((f"{sid}.send_counts", sc, want_s), (f"{sid}.recv_counts", rc, want_r)):
                if c.size != len(members):
                    probs.append(f"field {nm!r} has {c.size} counts for the {len(members)} members of rank "
                                 f"{rank}'s group of family {st['group']!r}")
                elif c.size and (int(c.min()) < 0 or int(c.max()) > cap):
                    probs.append(f"field {nm!r} holds counts outside [0, {cap}]")  # sums cannot overflow
                elif pairs and not np.array_equal(c, want):
                    probs.append(f"field {nm!r} differs from the manifest's pairs for rank {rank} "
                                 f"(programs.{prog}: {st['id']}.pairs)")
            received += int(want_r.sum())
        if probs:
            return probs
        bound = held + received  # every row of a buffer comes from an array of the shard or a received row
        for buf, rows in bufs.items():
            if rows > bound:
                probs.append(f"metadata field 'programs.{prog}.buffers.{buf}' = {rows} rows, more than the "
                             f"shard's arrays and received rows can fill ({bound})")
        if probs:
            return probs
        if "same_as" not in pr:  # the same steps and arrays as the program it names
            probs += [f"{prog}: {x}" for x in structure_problems(steps, rp, bufs)]
    return probs


def check_shard(m: dict, rp, where, *, pairs: bool = False, layout=None) -> None:
    """:func:`shard_problems` as one :class:`PlanError` starting with the
    shard file ``where`` (the first problem; the count of others)."""
    probs = shard_problems(m, rp, pairs=pairs, layout=layout)
    if probs:
        more = f" (+{len(probs) - 1} more)" if len(probs) > 1 else ""
        raise PlanError(f"{where}: {probs[0]}{more}")


def check_manifest(m: dict, mf: Path, parse_layout) -> None:
    """Every field of a parsed manifest by type and against each other: required
    fields, the layout's groups and families, each step (:func:`check_steps`), the
    descriptive fields (:func:`check_fields`), shard entries. One PlanError naming
    the field of ``mf``. ``parse_layout(spec, ranks)`` is the layouts' parser."""
    def need(key, typ, where=m, name=None):
        name = name or key
        if key not in where:
            raise PlanError(f"{mf}: required field {name!r} is missing")
        val = where[key]
        if typ is int and (isinstance(val, bool) or not isinstance(val, int)):
            raise PlanError(f"{mf}: field {name!r} must be an integer, got {val!r}")
        if typ is not int and not isinstance(val, typ):
            raise PlanError(f"{mf}: field {name!r} must be {typ.__name__ if isinstance(typ, type) else typ}, "
                            f"got {type(val).__name__}")
        return val
    g = need("graph", dict)
    need("fingerprint", str, g, "graph.fingerprint")
    need("n", int, g, "graph.n")
    need("nnz", int, g, "graph.nnz")
    ranks = need("ranks", int)
    if ranks < 1:
        raise PlanError(f"{mf}: field 'ranks' must be >= 1, got {ranks}")
    k = need("k", int)
    if k != ranks:
        raise PlanError(f"{mf}: field 'k' = {k} differs from 'ranks' = {ranks} (k counts ranks)")
    need("layout", str)
    try:
        lay = parse_layout(m["layout"], ranks)
    except PartitionError as exc:
        raise PlanError(f"{mf}: field 'layout': {exc}") from None
    if need("row_blocks", int) != lay.row_blocks:
        raise PlanError(f"{mf}: field 'row_blocks' = {m['row_blocks']} but layout {lay.spec} on {ranks} ranks "
                        f"has {lay.row_blocks}")
    from ..models.normalize import NORMALIZATIONS
    if m.get("normalize") is not None and m.get("normalize") not in NORMALIZATIONS:
        raise PlanError(f"{mf}: field 'normalize' = {m.get('normalize')!r} is not null or one of "
                        f"{', '.join(NORMALIZATIONS)}")
    groups = need("groups", list)
    want = [gg.to_json() for gg in lay.groups()]
    if groups != want:
        raise PlanError(f"{mf}: field 'groups' differs from the groups of layout {lay.spec} on {ranks} ranks")
    progs = need("programs", dict)
    if "forward" not in progs:
        raise PlanError(f"{mf}: field 'programs.forward' is missing")
    check_steps(m, mf)  # every step field by type, before anything indexes with them
    families = {gg.family for gg in lay.groups()}
    for name, pr in progs.items():
        if not isinstance(pr, dict):
            raise PlanError(f"{mf}: field 'programs.{name}' must be an object")
        if "same_as" in pr:
            if pr["same_as"] not in progs or "same_as" in progs[pr["same_as"]]:
                raise PlanError(f"{mf}: field 'programs.{name}.same_as' names no program")
            continue
        steps = need("steps", list, pr, f"programs.{name}.steps")
        need("prefix", str, pr, f"programs.{name}.prefix")
        for i, st in enumerate(steps):
            where = f"programs.{name}.steps[{i}]"
            if not isinstance(st, dict) or st.get("op") not in STEPS:
                raise PlanError(f"{mf}: field '{where}.op' is not a known step "
                                f"({', '.join(STEPS)})")
            if st.get("id") != f"{pr['prefix']}.{i}":
                raise PlanError(f"{mf}: field '{where}.id' must be {pr['prefix']}.{i!s}")
            if "group" in st and st["group"] not in families:
                raise PlanError(f"{mf}: field '{where}.group' = {st['group']!r} is no group family of "
                                f"layout {lay.spec} ({', '.join(sorted(families))})")
            arrs = need("arrays", list, st, f"{where}.arrays")
            req, opt = STEPS[st["op"]].arrays, STEPS[st["op"]].optional_arrays
            if not set(req) <= set(arrs) <= set(req) | set(opt):
                raise PlanError(f"{mf}: field '{where}.arrays' = {arrs} does not fit op {st['op']!r}")
            if STEPS[st["op"]].pairs:
                pairs = need("pairs", list, st, f"{where}.pairs")
                a = _pairs_array(pairs)
                if a is None or (a.size and bool(((a[:, :2] < 0) | (a[:, :2] >= ranks)).any()
                                                 or int(a[:, 2].min()) <= 0)):
                    first = next((pr_ for pr_ in pairs if not (    # the error's path: the first one named
                        isinstance(pr_, list) and len(pr_) == 3 and all(_int(x) for x in pr_)
                        and 0 <= pr_[0] < ranks and 0 <= pr_[1] < ranks and pr_[2] > 0)), pairs)
                    raise PlanError(f"{mf}: field '{where}.pairs' holds {first!r}, not "
                                    f"[src rank, dst rank, rows > 0]")
    shards = need("shards", list)
    if len(shards) != ranks:
        raise PlanError(f"{mf}: field 'shards' lists {len(shards)} shards for ranks = {ranks}")
    for i, e in enumerate(shards):
        if not isinstance(e, dict) or e.get("rank") != i or not _count(e.get("bytes")) \
                or not isinstance(e.get("sha256"), str):
            raise PlanError(f"{mf}: field 'shards[{i}]' must hold rank = {i}, bytes (an int >= 0) and "
                            f"sha256 (str)")
    pf = need("partition_file", dict)
    if not _count(pf.get("bytes")) or not isinstance(pf.get("sha256"), str):
        raise PlanError(f"{mf}: field 'partition_file' must hold bytes (an int >= 0) and sha256 (str)")
    check_fields(m, mf, parse_layout)  # descriptive fields by type and against each other; shard file names
    check_topology_object(m.get("topology"), mf, ranks=ranks)   # what inspect prints and run reads


#: integer counts of a ``topology`` object (:func:`partplan.metrics.topology.topology_metrics`), >= 0
_OBJECT_COUNTS = ("ranks", "row_bytes", "local_rows", "local_bytes", "total_rows", "steps", "messages",
                  "busiest_rank", "busiest_rank_rows")
_OBJECT_REQUIRED = ("levels", "local_rows", "total_rows", "steps", "busiest_rank", "busiest_rank_rows", "cost",
                    "alpha_beta_s")
_LEVEL_COUNTS = ("domain_size", "domains", "crossing_rows", "crossing_messages", "crossing_bytes")


def check_topology_object(d, where, *, ranks: int | None = None) -> None:
    """A plan manifest's ``topology`` object (what :meth:`TopologyPlan.attach`
    records; None or absent: no topology) checked by type before anything
    reads it: its figures all present or all absent (a ``description`` alone
    routes a plan), counts integers >= 0, ``cost`` and ``alpha_beta_s`` finite
    numbers >= 0, ``levels`` a list of objects (a string ``name`` and integer
    counts), ``map`` an object with a string ``method``, ``topology`` and
    ``route`` strings, and ``description`` a topology that
    :func:`partplan.topology.machine.topology_from_json` reads (with all its checks)
    of ``ranks`` ranks when given. One :class:`~partplan.errors.PlanError`
    ``WHERE (field 'topology.X'): ...`` (``where``: the manifest file)."""
    import math

    from ..topology.machine import TopologyError, topology_from_json

    def bad(field: str, problem: str, val=None):
        got = "" if val is None else f", got {printable(repr(val))[:80]}"
        return PlanError(f"{where} (field 'topology.{field}'): {problem}{got}")

    def count(obj: dict, key: str, field: str) -> None:
        v = obj[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise bad(field, "must be an integer >= 0", v)

    if d is None:
        return
    if not isinstance(d, dict):
        raise PlanError(f"{where} (field 'topology'): must be an object or null, got {type(d).__name__}")
    if any(key in d for key in _OBJECT_REQUIRED):     # the figures come together (a report), or not at all
        for key in _OBJECT_REQUIRED:
            if key not in d:
                raise bad(key, "is missing")
    for key in _OBJECT_COUNTS:
        if key in d:
            count(d, key, key)
    for key in ("cost", "alpha_beta_s"):
        if key not in d:
            continue
        v = d[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise bad(key, "must be a finite number >= 0", v)
    for key in ("topology", "route"):
        if d.get(key) is not None and not isinstance(d[key], str):
            raise bad(key, "must be a string", d[key])
    levels = d.get("levels", [])
    if not isinstance(levels, list):
        raise bad("levels", "must be a list of objects", levels)
    for i, lv in enumerate(levels):
        if not isinstance(lv, dict):
            raise bad(f"levels[{i}]", "must be an object", lv)
        if not isinstance(lv.get("name"), str):
            raise bad(f"levels[{i}].name", "must be a string", lv.get("name"))
        for key in _LEVEL_COUNTS:
            if key not in lv:
                raise bad(f"levels[{i}].{key}", "is missing")
            count(lv, key, f"levels[{i}].{key}")
    if "map" in d:
        mp = d["map"]
        if not isinstance(mp, dict):
            raise bad("map", "must be an object with a string 'method'", mp)
        if not isinstance(mp.get("method"), str):
            raise bad("map.method", "must be a string", mp.get("method"))
    if d.get("description") is not None:
        try:
            t = topology_from_json(d["description"], source="topology.description")
        except TopologyError as exc:   # its message starts with the source, named here as the field
            msg = str(exc).removeprefix("topology.description").lstrip(" :")
            raise PlanError(f"{where} (field 'topology.description'): {msg}") from None
        if ranks is not None and t.ranks != int(ranks):
            raise bad("description", f"describes {t.ranks} ranks, the plan has {int(ranks)}")
