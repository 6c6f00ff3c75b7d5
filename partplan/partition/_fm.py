"""The FM refinement kernels under their former path: every name lives in the package
:mod:`partplan.partition.fm` (one module per phase: records, slots, costs, gains, heaps,
select, apply, updates, passes; see its doc) and is re-exported here, so
``from partplan.partition import _fm`` and ``_fm.<name>`` keep working.
"""
from __future__ import annotations

from .._kernels import monotonic  # noqa: F401
from .fm import (BL_WALK, HAVE_NUMBA, OBJ_CODES, SEED_CHUNK, ApplyScratch, CostModel, Current,  # noqa: F401
                 EvalScratch, FMScratch, Limits, MoveBatch, PartFocus, PartHeaps, PassOptions, PassScratch,
                 PinSlots, Topology, VolumeState, Waiting, _addvol, _best1, _better, _cnt, _cost, _dec, _fm,
                 _fm_passes, _hdown, _hremove, _hset, _hswap, _hup, _inc, _parts_of, _phi, _phis, _push_blocked,
                 _pw, _refresh, _sink, _touch, apply_move, apply_scratch, build_slots, count_neighbour_parts,
                 eval_moves, njit, njit_inline, njit_rc_free, roll_back, state_key, work_done)
