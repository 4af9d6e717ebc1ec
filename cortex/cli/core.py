"""The write path: init, write, run, status, quarantine."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional, TYPE_CHECKING

from cortex.cli.app import JSON, arg, autowatch, command, emit_json, emit_jsonl, flag, group, info, open_vault, opt, toggle
from cortex.errors import HELD_REASONS, UsageError

if TYPE_CHECKING:
    from cortex.vault import Vault


# Files `cortex init` adds its lines to when a person (or an older cortex) made them.
EDITED = (".gitignore", ".gitattributes", ".pre-commit-config.yaml")


@command(arg("path", optional=True, type=Path,
             help="Directory to make a vault (created if missing; default: --vault, else the current one)."))
def init(path: Optional[Path]) -> None:
    """Make PATH a ready vault: git repo, folders, schemas, config, hooks. Safe to re-run."""
    from cortex.cli.app import _options
    from cortex.layout import is_vault
    from cortex.vault import Vault

    path = path or _options["vault"] or Path(".")  # `cortex --vault X init` makes X, never the current directory
    # A vault made by an older cortex gets the lines it lacks added to files it has.
    was_vault, had = is_vault(path), {rel for rel in EDITED if (path / rel).is_file()}
    set_up: list[str] = []
    vault, created = Vault.init(path, set_up)
    _say_warnings(vault.root)
    if not created:
        if not set_up:
            info(f"{vault.root} is already a cortex vault: nothing changed.")
            _settings_checked_out(vault.root)
            return
        # A `git clone` of a vault: its files came with it, its git config and hooks did not.
        info(f"{vault.root} is already a cortex vault; set up on this machine:")
        for line in set_up:
            info(f"  {line}")
        _settings_checked_out(vault.root)
        return
    info(f"{vault.root} is already a cortex vault; brought up to date:" if was_vault
         else f"Initialised cortex vault in {vault.root}")
    for rel in created:
        info(f"  added cortex's lines to {rel}" if rel in had else f"  created {rel}")
    if was_vault:
        return
    import shlex

    where = shlex.quote(str(path))
    info(f"Next: `cortex --vault {where} write --type fact --body 'What to remember'`, then `cortex --vault {where} run`.")


def _say_warnings(root: Path) -> None:
    from cortex.distribution import workflow_warning
    from cortex.scaffold import hooks_warning
    from cortex.status import signing_warning

    for said in (workflow_warning(root), hooks_warning(root), signing_warning(root)):
        if said:
            info(f"cortex: {said}")


def _settings_checked_out(root: Path) -> None:
    """A sparse clone set up with a cone that leaves out observer/ (`sparse-checkout set
    mind`): every command after would say it is no vault, and tell the person to run init
    again. Said here, with what to add, and exit 1."""
    from cortex.layout import is_vault, settings_outside_checkout, settings_outside_checkout_message

    if not is_vault(root) and settings_outside_checkout(root):
        message, hint = settings_outside_checkout_message(root)
        info(f"cortex: {message}\n  hint: {hint}")
        raise SystemExit(1)


def _parse_entity(text: str) -> dict:
    name, sep, kind = text.rpartition(":")
    if not sep or not name.strip() or not kind.strip():
        raise UsageError(f"{text!r}: use NAME:TYPE, e.g. --entity Cortex:project")
    return {"name": name.strip(), "type": kind.strip()}


@command(
    arg("source", optional=True, metavar="-", help="`-` reads JSON lines from stdin (a batch)."),
    opt("--type", "-t", dest="type_", help="A taxonomy type: fact, decision, preference, ..."),
    opt("--body", "-b", help="The memory itself (1–500 characters)."),
    opt("--bucket", default="explicit", help="explicit (the person said it) or ambient (inferred)."),
    opt("--entity", "-e", repeat=True, help="NAME:TYPE, repeatable."),
    opt("--tag", repeat=True, help="Repeatable."),
    opt("--importance", type=float, help="0.0–1.0."),
    opt("--confidence", type=float, help="0.0–1.0."),
    opt("--context", help="What was going on (≤ 1000 characters)."),
    opt("--quote", help="The person's words (≤ 500 characters)."),
    opt("--session", default="cli", help="Session id: a UUID, or `cli`."),
    opt("--attribution", "--author", dest="author", help="Who said it: the note's attribution (default: system)."),
    opt("--timestamp", help="ISO-8601 (default: now)."),
    opt("--supersedes", metavar="ID|PATH",
        help="The memory this one replaces: `cortex run` archives it (reachable with --archived). "
             "A reference that names no memory here is a warning; a vault/ record, never archived, is refused."),
    flag("--json", dest="json_", help="Print what was appended and what was refused, as JSON."),
)
def write(source: Optional[str], type_: Optional[str], body: Optional[str], bucket: str, entity: list[str],
          tag: list[str], importance: Optional[float], confidence: Optional[float], context: Optional[str],
          quote: Optional[str], session: str, author: Optional[str], timestamp: Optional[str],
          supersedes: Optional[str], json_: bool) -> None:
    """Append one validated observation to the buffer (or a batch from stdin with `-`).
    A batch is all or nothing: one invalid line and none is appended; the message (and
    --json) names every invalid line. A write killed while it appends leaves none of its
    batch either: the next write, run or status cuts away what it had appended, and says
    so, before any run reads it; so a batch whose write did not print `appended` may be
    sent again (docs/agents.md says the exceptions)."""
    from cortex.errors import InvalidObservation
    from cortex.buffer import bounded_lines
    from cortex.model import Rejection
    from cortex.pipeline.parse import oversize as too_long, parse_line

    from cortex.errors import BatchRefused

    vault = open_vault()
    line_of: list[int] = []  # stdin line number of each observation in the batch
    refused: list[tuple[int, str]] = []
    if source == "-":
        batch = []
        limits = vault.settings.limits
        total = 0
        for n, (raw, length, oversize) in enumerate(bounded_lines(sys.stdin.buffer, limits.max_line_bytes), start=1):
            if not raw.strip():
                continue
            total += 1
            obj = too_long(length, limits) if oversize else parse_line(raw.rstrip(b"\r\n"), limits)
            if isinstance(obj, Rejection):
                refused.append((n, obj.detail))
                continue
            batch.append(obj)
            line_of.append(n)
        if not total:
            raise InvalidObservation("no observations on stdin")
    elif source is not None:
        raise UsageError(f"unexpected argument {source!r}; use `-` to read stdin")
    else:
        if not type_ or body is None:
            raise UsageError("--type and --body are required (or `-` to read JSON lines from stdin), "
                                     "e.g. cortex write --type fact --body 'The API is rate-limited'")
        obs = {"type": type_, "body": body, "bucket": bucket, "session_id": session}
        if author:
            obs["attribution"] = author
        if timestamp:
            obs["timestamp"] = timestamp
        if entity:
            obs["entities"] = [_parse_entity(e) for e in entity]
        if tag:
            obs["tags"] = tag
        for key, value in (("importance", importance), ("confidence", confidence), ("context", context), ("source_quote", quote),
                           ("supersedes", supersedes)):
            if value is not None:
                obs[key] = value
        batch = [obs]
    try:
        if refused:  # all or nothing: the valid lines are checked, so the message names every bad one
            try:
                _check_only(vault, batch)
            except BatchRefused as more:
                refused += [(line_of[i - 1], why) for i, why in more.refused]
            raise BatchRefused(sorted(refused), total, what="stdin line")
        try:
            warnings = vault.write(batch)
        except BatchRefused as exc:
            if source != "-":
                raise
            raise BatchRefused([(line_of[i - 1], why) for i, why in exc.refused], total, what="stdin line") from None
    except BatchRefused as exc:
        if json_:
            emit_json({"appended": 0, "total": exc.total, "refused": [{"line": n, "reason": why} for n, why in exc.refused]})
        raise
    from cortex.pipeline.security import foresee, foresight_message

    # What the run will hold or redact, said now (patterns and credentials: the learned
    # layer needs the embedding model, which a write does not load).
    foreseen = foresee(batch, vault.scanner, classify=False)
    for f in foreseen:
        where = f"line {line_of[f['line'] - 1]}: " if source == "-" else ""
        warnings.append(where + foresight_message(f))
    for warning in warnings:
        info(f"warning: {warning}")
    if json_:
        held = [{"line": line_of[f["line"] - 1] if source == "-" else 1, "field": f["field"], "rule": f["held"]}
                for f in foreseen if f["held"] is not None]
        redacted = [{"line": line_of[f["line"] - 1] if source == "-" else 1, "field": f["field"], "kinds": f["redacted"]}
                    for f in foreseen if f["redacted"]]
        emit_json({"appended": len(batch), "total": len(batch), "refused": [], "warnings": warnings,
                   "will_hold": held, "will_redact": redacted})
    info(f"appended {len(batch)} observation{'s' if len(batch) != 1 else ''} to {vault.buffer_path.relative_to(vault.root)}")


def _check_only(vault: Vault, batch: list) -> None:
    """Validate a batch without appending it (raises ``BatchRefused``)."""
    vault.write(batch, dry_run=True)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _recovered(report) -> str:
    """Notes an earlier run had decided (git was busy, or it was killed) and this run committed."""
    if not report.recovered_notes:
        return ""
    if report.held_back and not report.recovered:
        return f"; {report.recovered_notes} from the last run, held back while git was busy"
    return f"; {report.recovered_notes} recovered from the interrupted run"


def _repeats(report) -> str:
    """Held lines that made no entry: repeats of a deleted memory, counted on the one held."""
    n = report.quarantine_repeats
    if not n:
        return ""
    return ("; 1 a repeat, counted on the entry held for it" if n == 1 else
            f"; {n} repeats, each counted on the entry held for it")


def render_report(report) -> str:
    """What a run did, for people. A run with nothing to do says so in one line: the
    scheduled `cortex run` every few minutes appends it to observer/cron.log."""
    q = report.quarantined_total
    if not (report.read or report.commits or report.recovered or report.held_back or report.recovered_notes or report.warnings
            or report.rotated or report.dry_run):
        return f"cortex run: nothing to do, the buffer is empty ({report.seconds:.2f}s)"
    lines = [
        f"cortex run: {_plural(report.read, 'line')} read in {report.seconds:.2f}s" + (" (dry run: nothing written)" if report.dry_run else ""),
        f"  memorized        {report.memorized}" + (f"  ({_plural(report.commits, 'commit')}{_recovered(report)})"
                                                       if not report.dry_run else ""),
        f"  reinforced       {report.reinforced}",
        f"  below threshold  {report.below_threshold}",
        f"  quarantined      {q}"
        + (f"  ({', '.join(f'{k} {v}' for k, v in sorted(report.quarantined.items()))}{_repeats(report)})"
           " → `cortex quarantine list`" if q else ""),
    ]
    if report.dropped:
        lines.append(f"  dropped          {report.dropped}  (untrusted sources, see observer/skipped.jsonl)")
    if report.redacted:
        lines.append(f"  redacted         {_plural(report.redacted, 'credential')}")
    if report.truncated:
        lines.append(f"  truncated        {_plural(report.truncated, 'field')}")
    if report.superseded:
        lines.append(f"  superseded       {len(report.superseded)}  (archived, replaced by newer memories; `query --archived` finds them)")
    if report.recovered:
        lines.append("  recovered an interrupted run first")
    elif report.held_back:
        lines.append("  finished first: the last run's commit, held back while git was busy (exit 75)")
    if report.rotated:
        lines.append("  buffer fully consumed: rotated into observer/archive/")
    lines += [f"  warning: {w}" for w in report.warnings[:20]]
    if len(report.warnings) > 20:
        lines.append(f"  … and {len(report.warnings) - 20} more warnings (--json shows all)")
    return "\n".join(lines)


@command(
    JSON,
    flag("--dry-run", help="Show the plan; write and commit nothing."),
    opt("--commit-per", metavar="note|session|run",
        help="One commit per note, per session or per run (default: run, or observer/config.yml)."),
    opt("--limit", type=int, min=1, help="Process at most this many lines."),
    toggle("--sync", help="`cortex sync` before (fetch, merge) and after (push) the run (default: this machine's "
                          "`git config cortex.syncOnRun`, else sync.on_run in observer/config.yml)."),
)
def run(json_: bool, dry_run: bool, commit_per: Optional[str], limit: Optional[int], sync: Optional[bool]) -> int:
    """Process the buffer: validate, scan, score, dedup, route, write notes, commit."""
    if commit_per not in (None, "note", "session", "run"):
        raise UsageError("--commit-per must be note, session or run")
    vault = open_vault()
    sync = (vault.sync_on_run if sync is None else sync) and not dry_run
    # the remote's notes first: their hashes dedup this run's lines
    synced = _sync_around(vault, push=False) if sync else None
    report = vault.run(dry_run=dry_run, commit_per=commit_per, limit=limit)
    if sync and synced["ok"]:  # a sync that failed before the run is said once, not tried again after it
        before, synced = synced, _sync_around(vault, push=None)
        if synced["ok"] and synced["integrated"] == "up to date":
            synced["integrated"] = before["integrated"]  # what the run's first sync brought
    code = synced["exit_code"] if synced else 0
    if dry_run:
        plan = report.plan
        # The same report as a real run, with what it would do under `plan`.
        planned = {
            "notes": [{"path": n.path, "title": n.title, "id": n.note_id} for n in plan.notes],
            "reinforcements": [{"id": r.note_id, "path": r.path, "at": r.at} for r in plan.reinforcements],
            "rejections": [{"key": k, "reason": w.reason, "detail": w.detail} for k, _, w in plan.rejections],
        }
        if json_:
            emit_json({**report.to_json(), "plan": planned})  # a dry run syncs nothing
        else:
            for n in planned["notes"]:
                print(f"new        {n['path']}  {n['title']}")
            for r in planned["reinforcements"]:
                print(f"reinforce  {r['path']}")
            for r in planned["rejections"]:
                print(f"{r['reason']:<10} {r['key']}  {r['detail']}")
    elif json_:
        emit_json({**report.to_json(), **({"sync": synced} if synced else {})})
    info(render_report(report))
    return code


def _sync_around(vault: Vault, *, push) -> dict:
    """A sync around `cortex run`: a failure is said, never fatal to the run (the notes are
    committed here and go out next time); its exit code is the run's when the run did well.
    What came of it is the `sync` of `run --sync --json`: a failure in the shape of every
    command's (README, "Exit codes"), so a script can tell a run whose push failed."""
    from cortex.errors import CortexError
    from cortex.sync import sync

    try:
        report = sync(vault, push_changes=push)
    except CortexError as exc:
        info(f"cortex: sync: {exc.message}" + (f"\n  hint: {exc.hint}" if exc.hint else ""))
        return {"ok": False, "error": exc.kind, "message": exc.message, "hint": exc.hint,
                "paths": list(exc.paths), "exit_code": exc.exit_code}
    if report.integrated != "up to date" or report.pushed or report.settled:
        info(f"sync: {report.integrated}" + (", pushed" if report.pushed else "")
             + (f", {len(report.settled)} settled" if report.settled else ""))
    return {"ok": True, "integrated": report.integrated, "pushed": bool(report.pushed), "exit_code": 0}


@command(JSON)
def status(json_: bool) -> None:
    """Backlog, notes per partition and type, quarantine, pending reinforcements, last runs."""
    vault = open_vault()
    s = vault.status()
    _status_text(s, json_)
    if not (s.get("watch") or {}).get("running"):
        autowatch(vault.root)


def _status_text(s: dict, json_: bool) -> None:
    if json_:
        emit_json(s)
        return
    print(f"vault        {s['vault']}")
    print(f"backlog      {s['backlog']['lines']} lines ({s['backlog']['bytes']} bytes) waiting for `cortex run`")
    for note in s["backlog"].get("notes", []):
        print(f"  note: {note}")
    n = s["notes"]
    print(f"notes        {n['total']} ({', '.join(f'{p} {c}' for p, c in n['by_partition'].items())}; {n['archived']} archived)")
    for partition, types in n["by_type"].items():
        if types:
            print(f"  {partition:<6} " + ", ".join(f"{t} {c}" for t, c in types.items()))
    repeats = s.get("quarantine_repeats", 0)
    print(f"quarantine   {s['quarantine']} held"
          + (f", and {_plural(repeats, 'repeat')} counted on them (a memory a person deleted, said again)" if repeats else "")
          + (" → `cortex quarantine list`" if s["quarantine"] else ""))
    pr = s["pending_reinforcements"]
    print(f"reinforce    {pr['observations']} pending on {pr['notes']} note{'' if pr['notes'] == 1 else 's'}")
    last = s["last_run"] or {}
    print(f"last run     {last.get('at', 'never')}")
    for job, info_ in sorted((s.get("jobs") or {}).items()):
        print(f"  {job:<10} last {info_.get('last_run', 'never')}" + (f", next {info_['next_run']}" if info_.get("next_run") else ""))
    idx = s["index"]
    print(f"index        {idx['state']}" + (f" ({idx['hint']})" if idx.get("hint") else ""))
    sy = s.get("sync")
    if sy:
        print(f"sync         {sy['ahead']} ahead, {sy['behind']} behind {sy['upstream']} (as of the last fetch; "
              f"last `cortex sync` {sy['last_sync'] or 'never'})")
    watch = s.get("watch") or {}
    print("watch        " + (f"running (pid {watch['pid']}): checks stat only the changed notes" if watch.get("running")
                             else "not running (`cortex watch --background`; large vaults start it by themselves, Linux)"))
    if watch.get("other_cortex"):
        print(f"  but {watch['other_cortex']}")
    if s["run_in_progress"]:
        print("note: a run was interrupted; the next `cortex run` completes it")
    for warning in s.get("warnings", []):
        print(warning)
    op = s.get("git_operation")
    if op:
        waits = "; cortex commits nothing until it is over" if op["commits_wait"] else ""
        print(f"git          {op['name']} in progress{waits}: {op['finish']}")


quarantine = group("quarantine", help="Review held and rejected buffer lines.")
ID = arg("ident", metavar="ID", help="A held line's id (`cortex quarantine list`).")


@quarantine.command(
    JSON,
    flag("--jsonl", help="One JSON object per line."),
    opt("--reason", metavar="|".join(HELD_REASONS), help="Only lines held for this reason."),
    name="list",
)
def quarantine_list(json_: bool, jsonl: bool, reason: Optional[str]) -> None:
    """Every held line: id, reason, and why."""
    _check_reason(reason)
    entries = [e for e in open_vault().quarantine.entries() if reason is None or e.reason == reason]
    if json_:
        emit_json([{"id": e.short_id, **e.to_json()} for e in entries])
    elif jsonl:
        emit_jsonl({"id": e.short_id, **e.to_json()} for e in entries)
    else:
        for e in entries:
            again = f"held {e.count} times, last {e.last_seen}: " if e.count > 1 else ""
            print(f"{e.short_id:<24} {e.reason:<10} {again}{e.detail[:100]}")
        repeats = sum(e.count - 1 for e in entries)
        info(f"{len(entries)} held" + (f" ({_plural(repeats, 'repeat')} counted on them)" if repeats else "")
             + ". `cortex quarantine show ID` for a line; promote or discard it.")


def _check_reason(reason: str | None) -> None:
    if reason is not None and reason not in HELD_REASONS:
        raise UsageError(f"--reason {reason!r}: use {', '.join(HELD_REASONS[:-1])} or {HELD_REASONS[-1]}")


@quarantine.command(ID, JSON, name="show")
def quarantine_show(ident: str, json_: bool) -> None:
    """One held line, in full, with every detail (layer and score for security holds)."""
    e = open_vault().quarantine.find(ident)
    if json_:
        emit_json({"id": e.short_id, **e.to_json()})
        return
    print(f"id      {e.short_id}\nreason  {e.reason}\ndetail  {e.detail}\nat      {e.at}")
    for k, v in sorted(e.extra.items()):
        if k != "seen":  # where the repeats were counted up to, per buffer: for the run
            print(f"{k:<7} {v}")
    print(f"line    {e.line}")


@quarantine.command(ID, flag("--force", help="Also override a security hold (injection)."), JSON, name="promote")
def quarantine_promote(ident: str, force: bool, json_: bool) -> None:
    """Send a held line through the pipeline again, skipping the trust hold."""
    report = open_vault().promote(ident, force=force)
    if json_:
        emit_json(report.to_json())
    info(f"promoted {ident}: {report.memorized} memorized, {report.reinforced} reinforced, {report.below_threshold} below threshold")


@quarantine.command(
    ID,
    opt("--set", dest="set_", metavar="FIELD=VALUE", repeat=True,
        help="Change one field (a JSON value, or plain text), repeatable; no editor is opened."),
    flag("--stdin", help="Read the corrected line (one JSON object) from stdin."),
    JSON,
    name="edit",
)
def quarantine_edit(ident: str, set_: list[str], stdin: bool, json_: bool) -> None:
    """Correct a held line and send it through the pipeline again (security checks
    included). Without --set or --stdin, opens $EDITOR on the line."""
    import os
    import shlex
    import subprocess
    import tempfile

    vault = open_vault()
    entry = vault.quarantine.find(ident)
    if stdin:
        line = sys.stdin.read()
    else:
        try:
            obj = json.loads(entry.line)
        except ValueError:
            obj = None
        if set_:
            if not isinstance(obj, dict):
                raise UsageError("the held line is not a JSON object: edit it whole (--stdin or $EDITOR)")
            for item in set_:
                field, sep, value = item.partition("=")
                if not sep or not field:
                    raise UsageError(f"{item!r}: use FIELD=VALUE, e.g. --set type=fact")
                try:
                    obj[field] = json.loads(value)
                except ValueError:
                    obj[field] = value
            line = json.dumps(obj, ensure_ascii=False)
        else:
            editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
            text = json.dumps(obj, ensure_ascii=False, indent=2) if isinstance(obj, dict) else entry.line
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
                fh.write(text + "\n")
            try:
                if subprocess.run(f"{editor} {shlex.quote(fh.name)}", shell=True).returncode != 0:
                    raise UsageError(f"the editor ({editor}) failed; nothing changed")
                line = Path(fh.name).read_text(encoding="utf-8")
            finally:
                os.unlink(fh.name)
    report = vault.edit(ident, line)
    if json_:
        emit_json(report.to_json())
    info(f"edited {ident}: {report.memorized} memorized, {report.reinforced} reinforced, {report.below_threshold} below threshold")


@quarantine.command(ID, name="discard")
def quarantine_discard(ident: str) -> None:
    """Remove a held line for good."""
    open_vault().discard(ident)
    info(f"discarded {ident}")


@quarantine.command(
    opt("--older-than", help="Held longer than this: e.g. 30d, 2w, 12h."),
    opt("--reason", metavar="|".join(HELD_REASONS),
        help="Held for this reason (`deleted`: an agent's repeats of memories people deleted)."),
    name="purge",
)
def quarantine_purge(older_than: Optional[str], reason: Optional[str]) -> None:
    """Remove held lines older than a duration, or held for a reason (or both)."""
    from cortex.timefmt import parse_duration

    if older_than is None and reason is None:
        raise UsageError("say which: --older-than DURATION, --reason REASON, or both")
    _check_reason(reason)
    try:
        age = None if older_than is None else parse_duration(older_than)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    n = open_vault().purge(age, reason)
    which = " and ".join(w for w in (f"older than {older_than}" if older_than else "",
                                      f"held as {reason}" if reason else "") if w)
    info(f"purged {n} entr{'y' if n == 1 else 'ies'} {which}")
