"""Communication metrics: exact 1D volumes (:func:`analyze`), 1.5D/2D layouts,
α-β cost. Knows nothing of partitioners or plans."""
from .cost import alpha_beta_time, dtype_bytes
from .layouts import LayoutStats, analyze_15d, analyze_2d
from .ownership import owner_stats
from .stats import CommStats, analyze, analyze_owned, imbalance
from .volume1d import needed_pairs, volume_matrix, volume_matrix_unique

__all__ = ["CommStats", "LayoutStats", "analyze", "analyze_owned", "analyze_15d", "analyze_2d", "alpha_beta_time",
           "dtype_bytes", "imbalance", "needed_pairs", "owner_stats", "volume_matrix", "volume_matrix_unique"]
