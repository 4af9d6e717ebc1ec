"""The search index job: bring the search index up to date with what the jobs changed.

It updates an index that exists (incrementally: only changed notes are re-read). A vault
that has no index yet gets none here: ``cortex query`` or ``cortex index`` builds it on
first use, so scheduled maintenance never pays for a full build nobody asked for.
"""

from __future__ import annotations

import os

from cortex.maintenance.base import JobContext, JobResult

JOB = "index"
MODEL_ENV = "CORTEX_SEARCH_MODEL"  # the variable `cortex query` and `cortex index` read


def run(ctx: JobContext, *, dry_run: bool = False) -> JobResult:
    result = JobResult(JOB, dry_run=dry_run)
    root = ctx.vault.root
    from cortex.search.freshness import search_state

    if not search_state(root).exists():
        result.items.append({"updated": False, "why": "no search index yet: `cortex query` builds it on first use"})
        return result
    if dry_run:
        return result
    from cortex.search.freshness import GitProbe, search_token
    from cortex.search.index import IndexUnavailable, SearchIndex

    probe = GitProbe.start(root, since=search_token(root))
    index = SearchIndex(root, model=os.environ.get(MODEL_ENV) or None, taxonomy=ctx.taxonomy)
    try:
        try:
            index.load(vectors=False)
            report = index.refresh(probe)
        except IndexUnavailable as exc:
            report = index.rebuild(reason=str(exc))
    finally:
        index.close()
    result.changed = report.touched
    result.items.append({"updated": True, **report.as_dict()})
    return result
