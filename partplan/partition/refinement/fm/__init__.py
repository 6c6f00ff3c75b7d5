"""Compiled kernels of the bottleneck refinement (:mod:`partplan.partition.refinement.refine`) and of the
km1 label propagation of the fast mode (:mod:`partplan.partition.refinement.vcycle`).

Everything here works on the column-net hypergraph of A + I without building
it: the nets of vertex v are row v of A (self loop skipped) plus v's own net;
the pins of net j are column j of A (row j of Aᵀ, self loop skipped) plus j.

State (exact, updated by :func:`apply_move` in O(deg v + λ_v)): part, sparse
pin counts (:mod:`.slots`), λ_j, k×k volume matrix vol[q, r], send/recv per
part, send/recv message counts, total volume, part loads.

The FM pass (:func:`_fm`): every vertex's best move (over its ``max_targets``
best-connected parts) is kept in an indexed max-heap keyed by its gain in the
potential Φ = Σ_p φ(part p's loads) (module doc of refine.py). The top vertex
is re-evaluated against the current loads before it moves (lazy: loads of
other parts drift); after a move only the pins of nets whose pin counts
crossed 0/1/2 in the source or target part, and the pins of the moved
vertex's own net (its sender changed), are re-evaluated. Moves with a loss
are applied; the pass is rolled back to its best feasible prefix.

Modules, by phase of a pass:

* :mod:`.jit` — the numba decorators (cached, nogil; ``njit_rc_free``:
  without reference counting, for kernels that allocate nothing);
* :mod:`.records` — the named records the kernels take their arrays in,
  their units, the FM constants and :func:`work_done`;
* :mod:`.slots` — sparse pin counts per net;
* :mod:`.costs` — cost per part, the potential Φ, the best-state order, sinks;
* :mod:`.gains` — evaluate: a vertex's best target and its gain
  (:func:`_best1`, :func:`eval_moves`);
* :mod:`.heaps` — the per-part heaps and the waiting lists;
* :mod:`.select` — select: the heap to move from, the lazy re-evaluation;
* :mod:`.apply` — apply a move to the exact state; roll moves back;
* :mod:`.updates` — seed the heaps, re-evaluate what a move affects;
* :mod:`.passes` — the passes (:func:`_fm`, :func:`_fm_passes`);
* :mod:`.labelprop` — label propagation with exact km1 gains (fast mode).

Units: vertices = rows of A (the rows of H a part owns), k parts, volumes in
rows of H, loads in balance weight (row nnz, at least 1 per row), times in
seconds, work in work units (degrees of evaluated vertices). Without numba the
same functions run as plain Python (correct, slow: only for tiny graphs in
environments without numba).
"""
from __future__ import annotations

from .apply import _addvol, apply_move, apply_scratch, roll_back  # noqa: F401
from .costs import _better, _cost, _phi, _phis, _pw, _refresh, _sink, state_key  # noqa: F401
from .gains import _best1, _touch, eval_moves  # noqa: F401
from .heaps import _hdown, _hremove, _hset, _hswap, _hup, _push_blocked  # noqa: F401
from .jit import HAVE_NUMBA, njit, njit_inline, njit_rc_free  # noqa: F401
from .passes import _fm, _fm_passes  # noqa: F401
from .records import (BL_WALK, OBJ_CODES, SEED_CHUNK, ApplyScratch, CostModel, Current, EvalScratch,  # noqa: F401
                      FMScratch, Limits, MoveBatch, PartFocus, PartHeaps, PassOptions, PassScratch, PinSlots,
                      Topology, VolumeState, Waiting, work_done)
from .slots import _cnt, _dec, _inc, _parts_of, build_slots, count_neighbour_parts  # noqa: F401
