"""Manifest checks beyond the store's required fields: every step field and
descriptive field by type, and the figures the manifest records recounted.

:func:`check_fields` runs inside :func:`partplan.plan.store.read_manifest`
(so ``validate``, ``inspect``, ``export`` and ``load_plan`` all see one
:class:`~partplan.errors.PlanError` naming the field instead of a traceback on
a hand-edited manifest). :func:`recount` compares what the manifest says with
what the shards hold — each shard's summary (rows held, halo, nonzeros, rows
and messages sent and received) and the ``stats`` / ``stats_backward``
figures, recomputed by :meth:`partplan.layouts.Layout.volumes` from the matrix
the shards multiply and the partition in ``partition.arrow`` — and returns the
differences (``partplan validate`` reports them as its ``manifest`` check).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import PlanError
from .steps import STEPS
from .schema import PARTITION_FILE, shard_name
from .trust import plain_name_problem, printable

# a step's fields by kind come from the step registry (partplan.plan.steps: Step.fields /
# Step.optional); kinds: "buf" (a buffer name), "row" (int >= 0 or a buffer name), "bool";
# "group" is checked against the layout's families by the store
STEP_KNOWN = {"id", "op", "arrays", "pairs"}
BACKWARD_MODES = {"separate", "same-as-forward", "not-planned"}
PROGRAMS = ("forward", "backward")
_INT64_MAX = (1 << 63) - 1
MAX_F = 1 << 24   # feature columns a plan may be costed for (a row of 2^24 float64 is 128 MiB)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -_INT64_MAX <= v <= _INT64_MAX


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
                pairs = st.get("pairs")
                n = m["graph"]["n"]
                if not isinstance(pairs, list) or not all(
                        isinstance(x, list) and len(x) == 3 and all(_int(y) for y in x) and 0 < x[2] <= n
                        for x in pairs):
                    raise PlanError(f"{mf}: field '{where}.pairs' must list [src rank, dst rank, rows] with "
                                    f"0 < rows <= n = {n}")


def check_fields(m: dict, mf: Path) -> None:
    """Descriptive fields by type and against each other; file names of shards."""
    from ..layouts import parse_layout
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


def _pattern_symmetric(A) -> bool:
    P = A.copy().tocsr()
    P.data[:] = 1
    T = P.T.tocsr()
    P.sort_indices()
    T.sort_indices()
    return bool(np.array_equal(P.indptr, T.indptr) and np.array_equal(P.indices, T.indices))


def recount(plan, matrices: dict) -> list[str]:
    """Differences between the manifest's recorded figures and a recount.

    ``matrices`` maps "forward" (and "backward" when separate) to the scipy
    matrix the shards' SpMM steps multiply (as validate reassembles it).
    Returns problem strings (empty: the manifest agrees)."""
    from ..graph import Graph

    m = plan.manifest
    probs = []
    own = "conformal" if plan.owner is None else "decoupled"
    if m["ownership"] != own:
        probs.append(f"ownership = {m['ownership']!r} but partition.arrow makes it {own!r}")
    A = matrices["forward"]
    sym = _pattern_symmetric(A)
    gm = m["graph"]
    if "symmetric" in gm and gm["symmetric"] != sym:
        probs.append(f"graph.symmetric = {gm['symmetric']!r}, the planned matrix is {'' if sym else 'not '}symmetric")
    if gm.get("directed") is False and not sym:
        probs.append("graph.directed = false, but the planned matrix is not symmetric")
    weighted = any("data" in st["arrays"] for st in plan.steps("forward") if "data" in STEPS[st["op"]].optional_arrays)
    if "weighted" in gm and gm["weighted"] != weighted:
        probs.append(f"graph.weighted = {gm['weighted']!r}, the shards hold {'' if weighted else 'no '}values")
    for rp, e in zip(plan.ranks, m["shards"]):
        for key, val in rp.summary().items():
            if key != "rank" and e.get(key) != val:
                probs.append(f"shards[{rp.rank}].{key} = {e.get(key)!r}, the shard holds {val}")
    lay = plan.layout
    st = m.get("stats") or {}
    cost = {}
    if isinstance(st.get("alpha_s"), (int, float)) and isinstance(st.get("beta_s_per_byte"), (int, float)):
        cost = {"alpha": float(st["alpha_s"]), "beta": float(st["beta_s_per_byte"])}
    for prog, key in (("forward", "stats"), ("backward", "stats_backward")):
        rec = m.get(key)
        if rec is None or prog not in matrices:
            continue
        g = Graph.from_scipy(matrices[prog], pattern=True)
        owner = plan.owner if prog == "forward" else None
        fresh = lay.volumes(g, plan.part, owner=owner, f=m["f"], dtype=m["dtype"], **cost).summary()
        for name, val in fresh.items():
            have = rec.get(name)
            same = (have == val if not isinstance(val, float) or not isinstance(have, (int, float))
                    else bool(np.isclose(have, val, rtol=1e-12, atol=0)))
            if isinstance(val, tuple):
                same = have == list(val)
            if not same:
                probs.append(f"{key}.{name} = {have!r}, recounted from the shards: {val!r}")
    return probs
