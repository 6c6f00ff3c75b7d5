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

import numpy as np

from ..layouts import layout_from_manifest
from ..program.steps import STEPS


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
        routed = "ext" not in rp.buffers()
        for key, val in rp.summary().items():
            if key == "halo" and routed and e.get(key) == 0:   # a writer that left a routed plan's halo uncounted
                continue
            if key != "rank" and e.get(key) != val:
                probs.append(f"shards[{rp.rank}].{key} = {e.get(key)!r}, the shard holds {val}")
    lay = layout_from_manifest(plan.manifest)
    st = m.get("stats") or {}
    cost = {}
    ab = (st.get("alpha_s"), st.get("beta_s_per_byte"))
    if all(isinstance(x, (int, float)) and not isinstance(x, bool) and np.isfinite(x) and x >= 0 for x in ab):
        cost = {"alpha": float(ab[0]), "beta": float(ab[1])}
    elif any(x is not None for x in ab):   # the recount then uses the defaults, and differs where they do
        probs.append(f"stats.alpha_s / stats.beta_s_per_byte = {ab[0]!r} / {ab[1]!r}: not finite numbers >= 0")
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
