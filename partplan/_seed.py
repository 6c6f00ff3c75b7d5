"""Seeds as numpy takes them: any integer seed (negative ones included: METIS takes them, and
partplan's options accept them, :func:`partplan.partition.options.check_seed`) mapped into
numpy's non-negative range, so every layer that draws random numbers maps it the same way.

>>> numpy_seed(7), numpy_seed(-1) == 2 ** 63 - 1
(7, True)
"""
from __future__ import annotations

NUMPY_SEED_BITS = 63


def numpy_seed(seed: int) -> int:
    """``seed`` (an integer, already validated) in [0, 2^63): the identity there, else its low 63
    bits (two seeds that map to the same value draw the same numbers)."""
    return int(seed) & ((1 << NUMPY_SEED_BITS) - 1)
