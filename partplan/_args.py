"""The argument checks every public function shares (scikit-learn's one validation layer): a
wrong type, a bool where a number is meant, NaN, ±inf or a value out of range is one partplan
error naming the argument, raised before any work — never numpy's, torch's or pathlib's.

>>> check_int("k", 4)
4
>>> check_int("k", 4.5)
Traceback (most recent call last):
...
partplan.errors.OptionError: k must be an integer >= 0, got 4.5
>>> check_real("alpha", -1.0)
Traceback (most recent call last):
...
partplan.errors.OptionError: alpha must be a finite number >= 0, got -1.0
"""
from __future__ import annotations

import math
import numbers
import operator
import os

from .errors import OptionError

INT_MAX = 2 ** 62  # larger counts overflow the int64 kernels' arithmetic


def check_int(name: str, v, *, lo: int = 0, hi: int = INT_MAX, none_ok: bool = False,
              error=OptionError) -> int | None:
    """``v`` as an int in [lo, hi]: anything that is an integer by ``operator.index`` (Python and
    numpy integers, a 0-d integer array, a torch integer scalar); bools and floats (4.0 too, as
    ``partition``'s k) refused."""
    if v is None and none_ok:
        return None
    try:
        x = None if isinstance(v, (bool, np_bool())) else operator.index(v)
    except TypeError:
        x = None
    if x is None or not lo <= x <= hi:
        bound = f">= {lo}" if hi >= INT_MAX and (x is None or x < lo) else f"in [{lo}, {hi}]"
        raise error(f"{name} must be an integer {bound}, got {v!r}")
    return int(x)


def np_bool() -> type:
    """numpy's bool scalar type (its ``operator.index`` is an int; as an argument it is a bool)."""
    import numpy as np
    return np.bool_


def check_real(name: str, v, *, lo: float = 0.0, hi: float = math.inf, lo_open: bool = False,
               hi_open: bool = False, none_ok: bool = False, error=OptionError) -> float | None:
    """``v`` as a finite float in the interval (open ends where asked; bools refused)."""
    if v is None and none_ok:
        return None
    ok = not isinstance(v, bool) and isinstance(v, numbers.Real) and math.isfinite(float(v))
    if ok:
        x = float(v)
        ok = (x > lo if lo_open else x >= lo) and (x < hi if hi_open else x <= hi)
    if not ok:
        if hi == math.inf:
            dom = f"{'>' if lo_open else '>='} {lo:g}"
        else:
            dom = f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
        raise error(f"{name} must be a finite number {dom}, got {v!r}")
    return float(v)


def check_bool(name: str, v, error=OptionError) -> bool:
    """``v`` as a bool: True / False (numpy's too, or the integers 0 and 1); a string such as "no",
    None or a list is refused (any truthy object would otherwise switch the option on)."""
    if type(v).__module__ == "numpy" and type(v).__name__ in ("bool", "bool_"):   # np.True_ / np.False_
        return bool(v)
    if not isinstance(v, bool) and not (isinstance(v, numbers.Integral) and int(v) in (0, 1)):
        raise error(f"{name} must be True or False, got {v!r}")
    return bool(v)


def as_numpy(a, error=OptionError, what: str = ""):
    """A numpy view / copy of the array-like ``a``: a torch tensor (any device, with grad, a
    subclass such as PyG's EdgeIndex) detached and moved to the CPU, bfloat16 / float16 read as
    float32 (numpy has no bfloat16); anything else through np.asarray. A sparse tensor or one on
    the meta device (no values) is one ``error`` (``what`` prefixes its message)."""
    import numpy as np
    if not (hasattr(a, "detach") and hasattr(a, "cpu")):
        return np.asarray(a)
    import torch
    if getattr(a, "layout", torch.strided) != torch.strided:
        raise error(f"{what}a sparse torch tensor ({a.layout}) is not an array: give its indices and values "
                    f"(Graph.from_edge_index), or a scipy matrix to Graph.from_scipy")
    if getattr(a, "is_meta", False):
        raise error(f"{what}a tensor on the meta device holds no values (shape {tuple(a.shape)}): give one on "
                    f"a real device")
    a = a.detach().cpu()
    if hasattr(a, "as_subclass"):
        a = a.as_subclass(torch.Tensor)
    if a.dtype in (torch.bfloat16, torch.float16):
        a = a.to(torch.float32)
    return a.numpy()


def check_path(name: str, v, error=OptionError) -> os.PathLike | str:
    """``v`` when it is a path (str or os.PathLike, not empty)."""
    if isinstance(v, (str, os.PathLike)) and str(os.fspath(v)) != "":
        return v
    raise error(f"{name} must be a file path (str or os.PathLike), got {v!r}")
