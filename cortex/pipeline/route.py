"""Stage 6: the folder a type's notes live in (taxonomy routing, overridable per type)."""

from __future__ import annotations

from cortex.taxonomy import Taxonomy


def directory_for(type_name: str, taxonomy: Taxonomy) -> str:
    spec = taxonomy.get(type_name)
    if spec is None:  # schema stage rejects unknown types first
        raise KeyError(type_name)
    return spec.directory
