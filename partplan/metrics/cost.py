"""Byte sizes and the α-β (latency-bandwidth) cost model.

Per rank r, one all-to-all-v of an SpMM costs
``t_r = α · max(send_msgs_r, recv_msgs_r) + β · max(send_bytes_r, recv_bytes_r)``
(a rank's port sends and receives concurrently); the exchange takes
``max_r t_r`` seconds. Defaults: α = 10 µs per message, β = 0.1 ns per byte
(10 GB/s links) — set both from your own machine.
"""
from __future__ import annotations

import numpy as np

from ..errors import OptionError

DEFAULT_ALPHA_S = 1e-5
DEFAULT_BETA_S_PER_BYTE = 1e-10


#: the widest feature row anything is costed for, columns (a row of 2^24 float64 is 128 MiB; byte
#: counts of every rank pair then stay far inside int64)
MAX_WIDTH = 1 << 24


def check_width(f) -> int:
    """``f`` (feature width, columns of H) as an int in [1, :data:`MAX_WIDTH`], else
    :class:`~partplan.errors.OptionError` (a ValueError)."""
    if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or not 1 <= f <= MAX_WIDTH:
        raise OptionError(f"f (feature width) must be an integer in [1, 2^24], got {f!r}")
    return int(f)


def check_cost(f, dtype, alpha, beta) -> int:
    """The cost model's arguments: ``f`` (:func:`check_width`), ``dtype`` a known element type
    name (:func:`dtype_bytes`), α and β finite numbers >= 0 (seconds per message, per byte).
    Returns ``f`` as a Python int (a numpy integer would reach the figures and their JSON)."""
    from .._args import check_real
    f = check_width(f)
    dtype_bytes(dtype)
    check_real("alpha", alpha)
    check_real("beta", beta)
    return f


def dtype_bytes(dtype) -> int:
    """Bytes per value of a numpy dtype name ('float32', 'bfloat16', 'fp16', ...);
    :class:`~partplan.errors.OptionError` (a ValueError) for an unknown name."""
    aliases = {"bfloat16": 2, "bf16": 2, "fp16": 2, "half": 2, "fp32": 4, "float": 4, "fp64": 8, "double": 8}
    if type(dtype).__module__ == "torch" and str(dtype).startswith("torch."):   # torch.float16, torch.bfloat16
        dtype = str(dtype)[len("torch."):]
    if isinstance(dtype, str) and dtype.lower() in aliases:
        return aliases[dtype.lower()]
    try:
        if not isinstance(dtype, (str, np.dtype, type)):      # None would read as float64
            raise TypeError(dtype)
        dt = np.dtype(dtype)
        if dt.kind not in "fiuc" or dt.itemsize == 0:          # strings, objects, void, dates: not features
            raise TypeError(dtype)
        return int(dt.itemsize)
    except (TypeError, ValueError) as exc:
        from ..errors import OptionError
        raise OptionError(f"unknown dtype {dtype!r} (e.g. float32, float16, bfloat16, float64)") from exc


def dtype_name(dtype) -> str:
    """The name a figure records for ``dtype`` (checked by :func:`dtype_bytes`): a numpy dtype or
    scalar type and a torch dtype by their numpy-style name, a string as given.

    >>> dtype_name(np.float64), dtype_name(np.dtype("float16")), dtype_name("bf16")
    ('float64', 'float16', 'bf16')
    """
    dtype_bytes(dtype)
    if isinstance(dtype, str):
        return dtype
    if type(dtype).__module__ == "torch":
        return str(dtype)[len("torch."):]
    return np.dtype(dtype).name


def alpha_beta_time(send_msgs, recv_msgs, send_bytes, recv_bytes,
                    alpha: float = DEFAULT_ALPHA_S, beta: float = DEFAULT_BETA_S_PER_BYTE) -> np.ndarray:
    """float64[k]: estimated seconds of each rank in one exchange (see module doc): messages and
    bytes per rank (non-negative counts of one shape), α and β finite numbers >= 0 (seconds per
    message, per byte); OptionError naming the argument otherwise.

    >>> alpha_beta_time([1, 2], [2, 0], [8, 0], [0, 16], alpha=1.0, beta=0.5).tolist()
    [6.0, 10.0]
    """
    from .._args import check_real
    alpha, beta = check_real("alpha", alpha), check_real("beta", beta)
    arrs = {}
    for name, v in (("send_msgs", send_msgs), ("recv_msgs", recv_msgs), ("send_bytes", send_bytes),
                    ("recv_bytes", recv_bytes)):
        a = np.asarray(v)
        if a.dtype.kind not in "iuf" or (a.size and not (np.all(np.isfinite(a)) and a.min() >= 0)):
            raise OptionError(f"{name} must hold non-negative finite numbers (one per rank), got {v!r:.60}")
        arrs[name] = a.astype(np.float64)
    shapes = {a.shape for a in arrs.values()}
    if len(shapes) > 1:
        raise OptionError(f"send_msgs, recv_msgs, send_bytes and recv_bytes must have one shape, got "
                          f"{', '.join(str(a.shape) for a in arrs.values())}")
    return (alpha * np.maximum(arrs["send_msgs"], arrs["recv_msgs"])
            + beta * np.maximum(arrs["send_bytes"], arrs["recv_bytes"]))
