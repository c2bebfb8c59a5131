"""Many ranks: how a view of several ranks is combined, and what only several ranks show.

``across`` (the rule that combines a view's per-rank tables), ``combined`` (the combined tables
of a job), ``collectives`` (collective calls matched across ranks), ``distributed`` (the
distributed view) and ``ranks`` (per-rank figures and the slowest rank).
"""
