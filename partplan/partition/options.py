"""One validation layer for the partitioners' numeric options (partition,
refine, the fast preset's V-cycle): a wrong type, NaN, ±inf or a value out
of range is one :class:`~partplan.errors.OptionError` naming the option —
never a numpy / numba exception after work has started. ε (``imbalance``) is
a :class:`~partplan.errors.PartitionError`, as in the backends.

Examples
--------
>>> check_int("rounds", 3)
3
>>> check_real("cluster_weight", float("inf"), lo=0, lo_open=True)
Traceback (most recent call last):
...
partplan.errors.OptionError: cluster_weight must be a finite number > 0, got inf
>>> rng_seed(-1) == 2 ** 63 - 1      # negative seeds are valid (METIS takes them) and map to numpy's range
True
"""
from __future__ import annotations

import numpy as np

from .._args import INT_MAX, check_bool, check_int, check_real  # noqa: F401  (re-exported: the partitioners' options)
from .._seed import check_seed, numpy_seed  # noqa: F401  (check_seed re-exported: the options)
from ..errors import PartitionError

#: ε of the balance constraint wherever a caller does not give one: part weight (row nnz, at least 1)
#: <= ⌊(1+ε)·⌈W/k⌉⌋. Declared here once; every entry point and context reads it.
DEFAULT_IMBALANCE = 0.03
#: how far a bottleneck refinement may raise the total volume above its input's, as a fraction
DEFAULT_VOLUME_TOLERANCE = 0.03
MAX_THREADS = 1024   # an engine's worker threads at most (Mt-KaHyPar, KaMinPar)
MAX_WORKERS = 1024   # the default pipeline's cores at most (lanes)


def check_imbalance(v) -> float:
    """ε of the balance constraint, in [0, 10) (-0.0 read as 0.0)."""
    return check_real("imbalance", v, lo=0.0, hi=10.0, hi_open=True, error=PartitionError) + 0.0


def rng_seed(v) -> int:
    """:func:`check_seed`, mapped into numpy's non-negative seed range
    (:func:`partplan._seed.numpy_seed`: the identity for 0 <= seed < 2^63)."""
    return numpy_seed(check_seed(v))


C_INT_SEED = 2 ** 31      # METIS, Mt-KaHyPar and KaHyPar take their seed as a C int


def engine_seed(v) -> int:
    """:func:`check_seed`, as a C engine takes it (a C int): the seed itself within
    [-2^31, 2^31), else its low 31 bits (any integer is a valid seed; two seeds that map to the
    same value give the same partition).

    >>> engine_seed(7), engine_seed(-7), engine_seed(2 ** 40 + 5)
    (7, -7, 5)
    """
    s = check_seed(v)
    return s if -C_INT_SEED <= s < C_INT_SEED else s & (C_INT_SEED - 1)


C_INT_MAX = 2 ** 31 - 1    # Mt-KaHyPar's and KaHyPar's vertex and net weights (and their sums) are C ints


def check_c_int_weights(engine: str, name: str, **weights) -> None:
    """Refuse, before the engine runs, weights a 32-bit engine would overflow: each array's sum
    (total vertex weight, total net weight) must be at most C_INT_MAX. ``weights``: name -> int
    array, or None (unit weights: not checked). Mt-KaHyPar reports only the total vertex weight;
    KaHyPar wraps silently and returns a wrong partition.

    >>> check_c_int_weights("kahypar", "g", vertex_weights=np.array([2 ** 30, 2 ** 30]))
    Traceback (most recent call last):
    ...
    partplan.errors.PartitionError: kahypar on g: the vertex weights sum to more than 2147483647, beyond its 32-bit weights; METIS, KaMinPar and the stream take 64-bit weights
    """
    for what, w in weights.items():
        if w is None:
            continue
        w = np.asarray(w)
        if w.size == 0:
            continue
        top = int(w.max())         # each at most C_INT_MAX: then an int64 sum cannot overflow
        if top > C_INT_MAX or int(w.sum(dtype=np.int64)) > C_INT_MAX:
            raise PartitionError(f"{engine} on {name}: the {what.replace('_', ' ')} sum to more than {C_INT_MAX}, "
                                 f"beyond its 32-bit weights; METIS, KaMinPar and the stream take 64-bit weights")


def _check_k(n: int, k: int):
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
        raise PartitionError(f"k must be an integer, got {k!r}")
    if k < 1:
        raise PartitionError(f"k must be >= 1, got {k}")
    if k > n:
        raise PartitionError(f"k={k} parts exceed n={n} vertices")
