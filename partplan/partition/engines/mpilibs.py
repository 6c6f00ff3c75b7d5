"""Finding the MPI partitioners' shared libraries (Debian packages).

The distributed engines are C libraries driven through :mod:`ctypes` under
``mpirun``: Zoltan (``libtrilinos-zoltan-dev``) and PT-Scotch with 64-bit
integers (``ptscotch`` / ``libptscotch-dev``, the ``scotch-int64`` build),
with OpenMPI (``openmpi-bin``, ``libopenmpi-dev``) and ``mpi4py`` from PyPI.
:func:`missing` names what is not installed, so the command can say what to
install before any work.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import os
import shutil
from pathlib import Path

#: where Debian puts the multi-arch libraries
_LIBDIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
            "/usr/local/lib")
#: the Debian packages each piece comes from
PACKAGES = {"mpirun": "openmpi-bin", "mpi4py": "mpi4py (pip)", "zoltan": "libtrilinos-zoltan-dev",
            "ptscotch": "libptscotch-dev"}
INSTALL_HINT = ("apt-get install openmpi-bin libopenmpi-dev libtrilinos-zoltan-dev ptscotch libptscotch-dev "
                "&& pip install mpi4py")


def _find(names: tuple[str, ...], subdir: str = "") -> Path | None:
    extra = os.environ.get("PARTPLAN_MPI_LIBDIR")
    dirs = ([extra] if extra else []) + [str(Path(d) / subdir) for d in _LIBDIRS]
    for d in dirs:
        for name in names:
            p = Path(d) / name
            if p.is_file():
                return p
    return None


def zoltan_path() -> Path | None:
    """The Zoltan shared library (Trilinos' build names it ``libtrilinos_zoltan``)."""
    return _find(("libtrilinos_zoltan.so", "libzoltan.so"))


def ptscotch_dir() -> Path | None:
    """The folder of PT-Scotch's 64-bit-integer build (``libptscotch.so`` with ``SCOTCH_Num`` = int64)."""
    p = _find(("libptscotch.so",), "scotch-int64")
    return None if p is None else p.parent


def missing(engine: str) -> list[str]:
    """The packages ``engine`` ("zoltan", "ptscotch", "stream") still needs, empty when it can run."""
    need = []
    if shutil.which("mpirun") is None:
        need.append(PACKAGES["mpirun"])
    if importlib.util.find_spec("mpi4py") is None:
        need.append(PACKAGES["mpi4py"])
    if engine == "zoltan" and zoltan_path() is None:
        need.append(PACKAGES["zoltan"])
    if engine == "ptscotch" and ptscotch_dir() is None:
        need.append(PACKAGES["ptscotch"])
    return need


def load_zoltan() -> ctypes.CDLL:
    p = zoltan_path()
    if p is None:
        raise OSError(f"Zoltan is not installed ({PACKAGES['zoltan']})")
    return ctypes.CDLL(str(p), mode=ctypes.RTLD_GLOBAL)


def load_ptscotch() -> ctypes.CDLL:
    d = ptscotch_dir()
    if d is None:
        raise OSError(f"PT-Scotch (64-bit integers) is not installed ({PACKAGES['ptscotch']})")
    with open("/proc/self/maps") as fh:   # Zoltan links the 32-bit build: both in one process mix symbols
        if "libtrilinos_zoltan" in fh.read():
            raise OSError("PT-Scotch cannot run in a process that loaded Zoltan (it links the 32-bit Scotch)")
    for dep in ("libscotcherr.so", "libscotch.so", "libptscotcherr.so"):
        ctypes.CDLL(str(d / dep), mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(str(d / "libptscotch.so"), mode=ctypes.RTLD_GLOBAL)


__all__ = ["missing", "zoltan_path", "ptscotch_dir", "load_zoltan", "load_ptscotch", "INSTALL_HINT", "PACKAGES"]
