"""Communication metrics: exact 1D volumes (:func:`analyze`), 1.5D/2D layouts,
α-β cost. Knows nothing of partitioners or plans.

The raw-CSR counters here (:func:`volume_matrix`, :func:`volume_matrix_unique`,
:func:`needed_pairs`) check their arguments (one error naming the argument)
and call :mod:`partplan.metrics.volume1d`, which partplan's own code calls
directly on graphs and partitions it has already checked."""
from __future__ import annotations

import numpy as np

from . import volume1d as _v1
from .cost import alpha_beta_time, dtype_bytes
from .layouts import LayoutStats, analyze_15d, analyze_2d
from .ownership import owner_stats
from .stats import CommStats, analyze, analyze_owned, imbalance


def _csr(indptr, indices, n_cols: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """(indptr, indices as int64, n_cols) of a raw CSR checked by :func:`partplan.graph.check_csr`:
    a square matrix (``n_cols`` None) or one of ``n_cols`` columns."""
    from .._args import check_int
    from ..errors import GraphFormatError
    from ..graph import check_csr
    if n_cols is not None:
        n_cols = check_int("n_cols", n_cols, lo=0, error=GraphFormatError)
    indptr, indices = check_csr(indptr, indices, n_cols)
    return indptr, indices, indptr.size - 1 if n_cols is None else n_cols


def volume_matrix(indptr, indices, part, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(vol int64[k, k], lam int64[n]) of the square CSR ``(indptr, indices)`` for ``part``
    (n part ids in [0, k)): rows of H sent from part q to part r, and each column's connectivity
    λ_j (parts needing it, owner included). Checked (GraphFormatError / PartitionError naming the
    argument); :func:`analyze` gives every figure of a :class:`~partplan.Graph`.

    >>> volume_matrix([0, 1, 2], [1, 0], [0, 1], 2)[0].tolist()
    [[0, 1], [1, 0]]
    """
    from ..parts import as_partition
    indptr, indices, n = _csr(indptr, indices)
    part, k = as_partition(part, n, k)
    return _v1.volume_matrix(indptr, indices, part, k)


def volume_matrix_unique(indptr, indices, part, k: int) -> np.ndarray:
    """:func:`volume_matrix`'s vol by ``np.unique`` over (j, part[i]) pairs (the benchmark's
    baseline); arguments checked the same way.

    >>> volume_matrix_unique([0, 1, 2], [1, 0], [0, 1], 2).tolist()
    [[0, 1], [1, 0]]
    """
    from ..parts import as_partition
    indptr, indices, n = _csr(indptr, indices)
    part, k = as_partition(part, n, k)
    return _v1.volume_matrix_unique(indptr, indices, part, k)


def needed_pairs(indptr, indices, row_part, k: int, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (column j, part r) pairs such that some row of part r has a nonzero in column j,
    for a CSR of ``n_cols`` columns and ``row_part`` (one part id in [0, k) per row); int64
    arrays sorted by j then r. Checked as :func:`volume_matrix`.

    >>> [a.tolist() for a in needed_pairs([0, 2, 3], [0, 2, 2], [0, 1], 2, 3)]
    [[0, 2, 2], [0, 0, 1]]
    """
    from ..parts import as_partition
    indptr, indices, n_cols = _csr(indptr, indices, n_cols)
    row_part, k = as_partition(row_part, indptr.size - 1, k)
    return _v1.needed_pairs(indptr, indices, row_part, k, n_cols)


__all__ = ["CommStats", "LayoutStats", "analyze", "analyze_owned", "analyze_15d", "analyze_2d", "alpha_beta_time",
           "dtype_bytes", "imbalance", "needed_pairs", "owner_stats", "volume_matrix", "volume_matrix_unique"]
