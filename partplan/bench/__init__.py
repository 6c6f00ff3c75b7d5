"""The planner benchmark behind ``partplan bench`` (:mod:`.planner`) and the one method
table (:mod:`.methods`) it shares with ``partplan analyze`` and ``partplan demo``: every
partitioning method by name, run on the same graph, measured exactly."""
