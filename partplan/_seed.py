"""Seeds as numpy takes them: any integer seed (negative ones included: METIS takes them, and
partplan's options accept them, :func:`partplan.partition.options.check_seed`) mapped into
numpy's non-negative range, so every layer that draws random numbers maps it the same way.

>>> numpy_seed(7), numpy_seed(-1) == 2 ** 63 - 1
(7, True)
"""
from __future__ import annotations

import numbers

NUMPY_SEED_BITS = 63


def check_seed(v, error=None) -> int:
    """A seed: any integer (negative ones included; METIS takes them); a bool, a float or anything
    else is one ``error`` (default :class:`~partplan.errors.OptionError`) naming it."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        if error is None:
            from .errors import OptionError as error
        raise error(f"seed must be an integer, got {v!r}")
    return int(v)


def numpy_seed(seed: int) -> int:
    """``seed`` (an integer, already validated) in [0, 2^63): the identity there, else its low 63
    bits (two seeds that map to the same value draw the same numbers)."""
    return int(seed) & ((1 << NUMPY_SEED_BITS) - 1)
