"""The numba decorators of the refinement kernels (plain Python without numba).

* :data:`njit` — compiled, cached, without the GIL (the default pipeline runs
  independent refinements and V-cycles side by side, ``lanes.py``);
* :data:`njit_inline` — the same, inlined into every caller (small helpers of
  the hot loops; a helper inlined into a kernel compiles under that kernel's
  options);
* :data:`njit_rc_free` — kernels that allocate nothing (every array comes in a
  record) compile without numba's reference counting (NRT): with it,
  unpacking the records' arrays and the inlined helpers cost an atomic
  incref/decref pair per array each time, 3.2 x the time of a move evaluation
  (``_best1``) on a 6-regular graph at k = 16 (4.1 -> 1.3 us); a kernel that
  starts allocating fails to compile rather than running slowly.

Without numba the same functions run as plain Python (correct, slow: only for
tiny graphs in environments without numba).
"""
from __future__ import annotations

from .... import _cache  # noqa: F401  (numba's cache directory, set before numba is imported)

try:  # pragma: no cover - exercised by whichever environment runs the tests
    import numba

    HAVE_NUMBA = True
    njit = numba.njit(cache=True, nogil=True)
    njit_inline = numba.njit(cache=True, nogil=True, inline="always")
    njit_rc_free = numba.njit(cache=True, nogil=True, _nrt=False)
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

    def njit(f):
        return f

    njit_inline = njit_rc_free = njit
