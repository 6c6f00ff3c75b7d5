"""The machine and where the parts go on it.

:mod:`.machine` models the machine's hierarchy (:class:`Topology`: presets, JSON files,
probed matrices); it is all this package's namespace exports, so every layer can read a
topology. Placing parts on it sits above the partitioner: :mod:`.mapping` (a k-way
partition's parts onto ranks), :mod:`.hierarchy` (a partition split level by level) and
:mod:`.planning` (the plan command's topology options, checked and applied).
"""
from .machine import *  # noqa: F401,F403
from .machine import PRESET_HELP, __all__, topology_from_json  # noqa: F401
