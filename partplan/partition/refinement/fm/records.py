"""The named records the refinement kernels take their state in, and the FM constants.

Records are :func:`collections.namedtuple` s: numba compiles attribute access
and tuple unpacking of them, the arrays inside stay mutable; a scalar a kernel
changes is an array element (e.g. ``tot[0]``). Units: vertices = rows of A
(the rows of H a part owns), k parts, volumes in rows of H, loads in balance
weight (row nnz, at least 1 per row), times in seconds, work in work units
(summed degrees of evaluated vertices, :func:`work_done`).
"""
from __future__ import annotations

from collections import namedtuple

from .jit import njit_inline

BL_WALK = 64       # waiting (blocked) entries re-examined per move when a part gets room
SEED_CHUNK = 4096  # vertices evaluated between two looks at the clock when a pass (re)starts
OBJ_CODES = {"total": 0, "max-send": 1, "max-recv": 2, "max-both": 3, "weighted": 4}

Topology = namedtuple("Topology", "vptr vidx tptr tidx w w2")
Topology.__doc__ = """The graph: CSR of A (vptr, vidx: the nets of a vertex), CSR of Aᵀ (tptr,
tidx: the pins of a net), w: balance weight per vertex (row nnz, >= 1), w2: a second weight per
vertex under its own cap (Limits.cap2; the compute load on graphs with empty rows)."""
PinSlots = namedtuple("PinSlots", "soff lam dense spart scnt")
PinSlots.__doc__ = """Sparse pin counts per net: first slot soff[j], λ_j = lam[j], dense[j]
(slots indexed by part) else (part spart[s], count scnt[s]) pairs."""
VolumeState = namedtuple("VolumeState", "part load vol send recv smsg rmsg tot load2")
VolumeState.__doc__ = """The partition (part per vertex, load and load2 (of w2) per part) and its exact volumes in
rows of H: vol[q, r] (k×k), send/recv and smsg/rmsg (messages) per part,
tot = [total volume, messages] (int64[2], updated in place)."""
CostModel = namedtuple("CostModel", "obj alpha brb q mu")
CostModel.__doc__ = """obj: OBJ_CODES value; alpha: seconds per message; brb: seconds per row
of H; q: exponent of the potential Φ; mu: weight of Δ(total volume)."""
Limits = namedtuple("Limits", "cap cap_hard vlimit vlimit_hard max_targets cost_cap cap2")
Limits.__doc__ = """Balance caps (weight per part: of a best state / of any state; cap2: of
load2 in every state, never relaxed), total
volume limits (rows of H: of a best state / of any move), target parts
tried per vertex (its max_targets best connected), cost_cap (no move may
raise a part's cost above it, e.g. the max(send, recv) a volume refinement
must keep; < 0: none)."""
Current = namedtuple("Current", "inv M nmax relax tv")
Current.__doc__ = """Per evaluation: inv = 1 / the pass's scale, M = the current max cost,
nmax = the parts at it, relax = overloading moves allowed, tv = total volume."""
PartFocus = namedtuple("PartFocus", "phic hot sink")
PartFocus.__doc__ = """phic[p]: part p's term of Φ; hot[p]: its vertices may move; sink: the
cheapest part with room and the part with the most room (-1: none)."""
EvalScratch = namedtuple("EvalScratch", "dS dR mark tl dsm drm dvol pairs npairs buf tbuf tcnt leave tpos emask")
EvalScratch.__doc__ = """Scratch of _best1: per-part volume and message deltas (dS, dR, dsm, drm),
touched parts (mark, tl), pair deltas of "weighted" (dvol, pairs, npairs),
the parts of u's net (buf), candidate targets (tbuf, tcnt, tpos), leave
events and per-net target masks (leave, emask)."""
ApplyScratch = namedtuple("ApplyScratch", "crit crita critb ncrit buf")
ApplyScratch.__doc__ = """Scratch and output of apply_move: nets whose counts crossed 0/1/2
(crit), whose last pin is left in a (crita), with a first pin in b (critb);
ncrit = their counts; buf: the parts of a net."""
MoveBatch = namedtuple("MoveBatch", "verts only gain target blocked")
MoveBatch.__doc__ = """Vertices to evaluate (only[i] >= 0: that target only) and the results:
gain, target (-1: none), blocked (a better target refused by the cap, or -1)."""
PartHeaps = namedtuple("PartHeaps", "heap hkey pos hoff hsz")
PartHeaps.__doc__ = """One indexed max-heap per part in one array: part p's heap is
heap[hoff[p] : hoff[p] + hsz[p]], keys hkey[u], pos[u] = u's local index (-1: none)."""
Waiting = namedtuple("Waiting", "head nxt vert")
Waiting.__doc__ = """Per part a linked list (head[p], nxt[e], vert[e]) of the vertices whose
best move into p was refused by the balance cap."""
PassScratch = namedtuple("PassScratch", "hb cnts locked stamp mv_v mv_a")
PassScratch.__doc__ = """Scratch of the FM passes: hb[u] (the target of u's heap entry), cnts (per
part), locked[u] and stamp[u] (per vertex), mv_v/mv_a (the moves of a pass and their source parts)."""
FMScratch = namedtuple("FMScratch", "X A H F EV ONE BL S")
FMScratch.__doc__ = """Everything the FM passes write besides the state, allocated once by _fm:
X (:class:`EvalScratch`), A (:class:`ApplyScratch`), H (:class:`PartHeaps`), F
(:class:`PartFocus`), EV and ONE (:class:`MoveBatch` of n + 1 and of 1 vertex), BL
(:class:`Waiting`), S (:class:`PassScratch`)."""
PassOptions = namedtuple("PassOptions", "patience max_passes min_gain max_moves deadline big_deg use_blocked "
                                        "theta use_sink work_limit")
PassOptions.__doc__ = """Options of the FM passes (see _fm): patience (moves), max_passes,
min_gain (relative), max_moves (per pass), deadline (perf_counter seconds,
< 0: none), big_deg (nets/vertices above it are not re-evaluated), use_blocked,
theta (hot parts: cost >= theta × max), use_sink, work_limit
(work units, see :func:`work_done`; < 0: none — unlike the deadline, the same
on every machine)."""


@njit_inline
def work_done(stats):
    """Work units of the counters ``stats``: the summed degrees (nets) of the vertices whose moves
    were evaluated (stats[3:6]) plus what the caller charged for other stages (stats[6]).
    Deterministic: the work limits of the default pipeline count these, not seconds."""
    return stats[3] + stats[4] + stats[5] + stats[6]
