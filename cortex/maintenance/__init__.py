"""Scheduled maintenance: reinforce, decay, dedup, graph, and the search index.

Each job is a pure ``plan_*`` over a ``Snapshot`` of HEAD plus an ``apply`` that commits
with its own prefix (``reinforce:``, ``decay:``, ``dedup:``) under the vault lock.
``maintain.run_due`` runs the jobs that are due, in order, catching up on missed runs.
"""

JOBS = ("reinforce", "decay", "dedup", "graph", "index")
