"""``cortex graph``: notes, entities and tags as one graph, stored in ``graph.json`` of ``layout.cache_dir`` (``.git/cortex/``).

Nodes: every note (``note:<id>``), every entity a note names (``entity:<name>``: emergent,
no vault entry needed; attributions are entities too) and every tag (``tag:<tag>``).
Edges: ``attributed_to`` (note → its attribution), ``mentions`` (note → entity),
``links_to`` (note → note or entity, from ``[[wikilinks]]`` in the body and the
frontmatter ``links``, resolved the way Obsidian resolves them, so both graphs agree:
by path or file name; a link no file answers is, in Obsidian, a node of that name,
here the entity of that name),
``tagged`` (note → tag) and ``merged_into`` (archived duplicate → the note it joined).
Derived and untracked: rebuilt only when HEAD's notes changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TYPE_CHECKING

from cortex.fsutil import atomic_write
from cortex.maintenance.base import JobContext, JobResult
from cortex.maintenance.snapshot import Snapshot
from cortex.notes import REDACTED, name_key, tag_name, tag_within, wikilinks

if TYPE_CHECKING:
    from cortex.vault import Vault

JOB = "graph"
VERSION = 2  # 2: tags, entities and note names composed (NFC)
EDGE_KINDS = ("attributed_to", "mentions", "links_to", "tagged", "merged_into")


@dataclass
class Graph:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (source, kind, target)
    signature: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "signature": self.signature, "nodes": self.nodes,
                "edges": [list(e) for e in self.edges]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Graph":
        return cls(dict(data["nodes"]), [tuple(e) for e in data["edges"]], str(data.get("signature", "")))

    def counts(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for node in self.nodes.values():
            kinds[node["kind"]] = kinds.get(node["kind"], 0) + 1
        edges: dict[str, int] = {}
        for _, kind, _ in self.edges:
            edges[kind] = edges.get(kind, 0) + 1
        return {"nodes": kinds, "edges": edges}


def entity_key(name: str) -> str:
    return "entity:" + name_key(name)


_MERMAID = str.maketrans({'"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;", "\n": " "})


def build_graph(snapshot: Snapshot) -> Graph:
    """Pure: the graph of a snapshot."""
    g = Graph(signature=snapshot.signature)
    seen: set[tuple[str, str, str]] = set()

    def edge(source: str, kind: str, target: str) -> None:
        if source != target and (source, kind, target) not in seen:
            seen.add((source, kind, target))
            g.edges.append((source, kind, target))

    def entity(name: str, kind: str = "") -> str:
        key = entity_key(name)
        node = g.nodes.get(key)
        if node is None:
            g.nodes[key] = {"kind": "entity", "label": " ".join(name.split()), "type": kind}
        elif kind and not node.get("type"):
            node["type"] = kind
        return key

    by_id, by_stem, by_path = {}, {}, {}
    for note in snapshot:
        key = f"note:{note.key}"
        g.nodes[key] = {"kind": "note", "label": note.title, "path": note.path, "type": note.type or "",
                        "archived": note.archived}
        if note.id:
            by_id[note.id] = key
        by_stem.setdefault(name_key(note.name[:-3]), key)
        by_path[name_key(note.path[:-3])] = key
    for note in snapshot:
        key = f"note:{note.key}"
        if note.attribution:
            edge(key, "attributed_to", entity(note.attribution, "source"))
        for name, kind in note.entities:
            if REDACTED not in name:  # a redacted name is no entity to meet in other notes
                edge(key, "mentions", entity(name, kind))
        for tag in note.tags:
            tag_key = f"tag:{tag}"
            g.nodes.setdefault(tag_key, {"kind": "tag", "label": f"#{tag}"})
            edge(key, "tagged", tag_key)
        # The frontmatter `links` are the note's entities no note name forbids
        # (cortex.notes.linkable): resolved like any other link.
        for target in [*wikilinks(note.body), *(t for link in note.links for t in wikilinks(link))]:
            path = name_key(target).removesuffix(".md")
            stem = path.rsplit("/", 1)[-1]
            # As Obsidian: a path, else a file name, else a node of that name.
            dest = by_path.get(path) or ("/" not in path and by_stem.get(stem)) or entity(target)
            edge(key, "links_to", dest)
        if note.merged_into and note.merged_into in by_id:
            edge(key, "merged_into", by_id[note.merged_into])
    return g


# --- storage and questions -----------------------------------------------------------------

def graph_path(vault: Vault) -> Path:
    return vault.cache_dir / "graph.json"


def load_graph(vault: Vault) -> Graph | None:
    try:
        data = json.loads(graph_path(vault).read_text(encoding="utf-8"))
        return Graph.from_json(data) if data.get("version") == VERSION else None
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def save_graph(vault: Vault, graph: Graph) -> None:
    atomic_write(graph_path(vault), json.dumps(graph.to_json(), ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def find_nodes(graph: Graph, name: str) -> list[str]:
    """Nodes a person may mean by ``name``: an entity, ``#tag`` (and the tags nested in
    it), a note's id, path, file name or title."""
    folded = name_key(name)
    tag = tag_name(name)  # with the tags nested in it, as Obsidian's tag pane counts #project
    tags = sorted(k for k in graph.nodes if k.startswith("tag:") and tag_within(k[4:], tag)) if tag else []
    exact = [k for k in (entity_key(name), f"note:{name}") if k in graph.nodes] + tags
    if exact:
        return exact
    hits = []
    for key, node in graph.nodes.items():
        if node["kind"] == "note":
            path = node.get("path", "")
            if folded in (name_key(path), name_key(path.rsplit("/", 1)[-1][:-3]), name_key(node["label"])):
                hits.append(key)
    return hits


def neighbors(graph: Graph, key: str) -> list[dict[str, Any]]:
    out = []
    for source, kind, target in graph.edges:
        if source == key:
            out.append({"direction": "out", "edge": kind, "node": target, **graph.nodes.get(target, {})})
        elif target == key:
            out.append({"direction": "in", "edge": kind, "node": source, **graph.nodes.get(source, {})})
    return out


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def export(graph: Graph, fmt: str) -> str:
    if fmt == "dot":
        shapes = {"note": "box", "entity": "ellipse", "tag": "note"}
        lines = ["digraph cortex {", "  rankdir=LR;"]
        for key, node in sorted(graph.nodes.items()):
            lines.append(f"  {_dot_quote(key)} [label={_dot_quote(node['label'])}, shape={shapes.get(node['kind'], 'ellipse')}];")
        for s, kind, t in graph.edges:
            lines.append(f"  {_dot_quote(s)} -> {_dot_quote(t)} [label={_dot_quote(kind)}];")
        return "\n".join(lines + ["}"]) + "\n"
    if fmt == "graphml":
        from xml.sax.saxutils import quoteattr

        lines = [
            '<?xml version="1.0" encoding="UTF-8"?>',
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">',
            '  <key id="label" for="node" attr.name="label" attr.type="string"/>',
            '  <key id="kind" for="node" attr.name="kind" attr.type="string"/>',
            '  <key id="edge" for="edge" attr.name="kind" attr.type="string"/>',
            '  <graph id="cortex" edgedefault="directed">',
        ]
        for key, node in sorted(graph.nodes.items()):
            lines.append(f"    <node id={quoteattr(key)}><data key=\"label\">{_xml(node['label'])}</data>"
                         f"<data key=\"kind\">{_xml(node['kind'])}</data></node>")
        for n, (s, kind, t) in enumerate(graph.edges):
            lines.append(f"    <edge id=\"e{n}\" source={quoteattr(s)} target={quoteattr(t)}><data key=\"edge\">{kind}</data></edge>")
        return "\n".join(lines + ["  </graph>", "</graphml>"]) + "\n"
    if fmt == "mermaid":
        ids = {key: f"n{i}" for i, key in enumerate(sorted(graph.nodes))}
        shape = {"note": ('["', '"]'), "entity": ('(["', '"])'), "tag": ('{{"', '"}}')}
        lines = ["graph LR"]
        for key, node in sorted(graph.nodes.items()):
            left, right = shape.get(node["kind"], ('["', '"]'))
            label = node["label"].translate(_MERMAID)  # its entity codes: no raw markup reaches the page
            lines.append(f"  {ids[key]}{left}{label}{right}")
        for s, kind, t in graph.edges:
            lines.append(f"  {ids[s]} -->|{kind}| {ids[t]}")
        return "\n".join(lines) + "\n"
    raise ValueError(f"unknown format {fmt!r}: use dot, graphml or mermaid")


def _xml(text: str) -> str:
    from xml.sax.saxutils import escape

    return escape(text)


def current_graph(ctx: JobContext) -> tuple[Graph, bool]:
    """The stored graph when it matches HEAD, else a fresh one (saved). (graph, rebuilt?)"""
    snapshot = ctx.snapshot()
    stored = load_graph(ctx.vault)
    if stored is not None and stored.signature == snapshot.signature:
        return stored, False
    graph = build_graph(snapshot)
    save_graph(ctx.vault, graph)
    return graph, True


def run(ctx: JobContext, *, dry_run: bool = False) -> JobResult:
    result = JobResult(JOB, dry_run=dry_run)
    graph, rebuilt = current_graph(ctx)
    counts = graph.counts()
    path, root = graph_path(ctx.vault), ctx.vault.root
    # a linked worktree's git directory lies outside it
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    result.items.append({"rebuilt": rebuilt, "path": str(shown), **counts})
    return result
