"""Soak: a person commits through the real hooks while an agent appends observations and
`cortex run` and `cortex maintain` loop, all as separate processes on one vault.

The person does what people do: `git commit -a`, a plain `git commit` whose editor
stays open a while, a commit of one file while another has unstaged edits (pre-commit
stashes them), a commit by a git slow between reading the index and taking its lock
(strace holds it 0.3 s, where strace runs: as on a slow disk or in a large vault), and
retries when git says another process holds the index. Now and then the person deletes a
memory they find wrong (`git rm`, commit) and the agent later says it again. At the end
nothing a person wrote is lost or reverted, no note was deleted except by cortex's own
archive moves and the person's `git rm`, every observation is a note but the ones the
person deleted, which none brought back, HEAD and the index agree and `git fsck` is
clean.

With ``--remote`` the vault shares a bare remote with a second machine, whose agent,
`cortex run`, `cortex maintain` and `cortex sync` loop as well; the vault's own cortex
loop syncs too, and the person runs `git pull` now and then. At the end both machines
converge, and every observation of either machine is a note of both.

    python tests/soak.py --seconds 300      # `make soak`; prints the counts
    tests/test_soak.py                      # the bounded run in the suite
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

BIN = Path(sys.executable).parent


def _strace() -> bool:
    import shutil

    return shutil.which("strace") is not None and \
        subprocess.run(["strace", "-o", os.devnull, "true"], capture_output=True).returncode == 0


STRACE = _strace()  # to hold a person's git between its read of the index and its lock
EDITOR = "f() { sleep 0.4; echo 'person: slow editor' > \"$1\"; }; f"


def git(root: Path, *args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, env=env)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done


def cortex(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "cortex"), "--vault", str(root), *args], capture_output=True, text=True)


@dataclass
class Counts:
    person: Counter = field(default_factory=Counter)
    cortex: Counter = field(default_factory=Counter)
    observations: int = 0
    problems: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # bodies of the memories the person deleted (committed)


class Person:
    """Edits files under ``people/`` and commits them; remembers what each file must hold.

    What a commit holds is what the person's index held, not what they meant to commit:
    a file staged for a commit that failed (git busy) goes in with their next one."""

    def __init__(self, root: Path, rnd: random.Random, counts: Counts) -> None:
        self.root, self.rnd, self.counts = root, rnd, counts
        self.text: dict[str, str] = {}  # path -> what the person last wrote
        self.staged: dict[str, str] = {}  # path -> what their index holds, not yet committed
        self.committed: dict[str, str] = {}  # path -> what their last successful commit holds
        self.deleting: dict[str, str] = {}  # memory path -> body: removed in their index, not yet committed
        self.deleted_paths: set[str] = set()
        self.edits = 0

    def write(self, rel: str) -> None:
        self.edits += 1
        text = f"# {rel}\n\nEdit {self.edits}: the person's words, kept as written.\n"
        (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.root / rel).write_text(text)
        self.text[rel] = text

    def add(self, rel: str) -> bool:
        if git(self.root, "add", rel, check=False).returncode != 0:
            return False  # git busy: the file stays as it was in the index (untracked, if new)
        self.staged[rel] = self.text[rel]
        return True

    def commit(self, *args: str, env: dict | None = None, kind: str, slow: bool = False) -> None:
        going_in = dict(self.staged)
        if "-a" in args:  # every tracked file as it is now; an untracked one stays out
            going_in.update({rel: self.text[rel] for rel in {*self.committed, *self.staged}})
        if slow:  # as on a slow disk or a large vault: 0.3 s between reading the index and taking its lock
            argv = ["strace", "-o", os.devnull, "-e", "trace=close", "-P", str(self.root / ".git" / "index"),
                    "-e", "inject=close:delay_exit=300000:when=1", "git", "commit", *args]
            done = subprocess.run(argv, cwd=self.root, capture_output=True, text=True, env=env)
        else:
            done = git(self.root, "commit", *args, env=env, check=False)
        if "staged again as committed" in done.stdout + done.stderr:  # the guard mended an index read too early
            self.counts.person["index mended by the guard"] += 1
        if done.returncode == 0:
            self.committed.update(going_in)
            self.staged.clear()
            self.counts.deleted += self.deleting.values()
            self.deleted_paths.update(self.deleting)
            self.deleting.clear()
            self.counts.person[kind] += 1
        elif "nothing to commit" in done.stdout + done.stderr:
            self.counts.person["nothing left to commit"] += 1
        else:
            self.counts.person["retried (git busy)"] += 1
            if os.environ.get("SOAK_VERBOSE"):
                print(f"person: git commit {' '.join(args)} failed: {(done.stderr + done.stdout).strip()[-600:]}")

    def pull(self) -> None:
        """The person's own `git pull` (a merge, as git's default): it gives way when
        another git holds the index, and conflicts only where git itself must: a memory
        deleted on one side (the person's `git rm`) that the other changed meanwhile —
        counted it (git's modify/delete) or archived it (a move into mind/archive/: git's
        rename/delete, then a modify/delete of the archived file when the move added the
        archive fields). No merge driver sees a deletion; the person aborts, and `cortex
        sync` settles it for the deletion. Any other conflict is a problem."""
        done = git(self.root, "pull", "--no-rebase", "--no-edit", "-q", "origin", "main", check=False)
        said = done.stdout + done.stderr
        conflicts = [line for line in said.splitlines() if line.startswith("CONFLICT (")]
        if done.returncode == 0:
            self.counts.person["git pull"] += 1
        elif conflicts and all(line.startswith(("CONFLICT (modify/delete): mind/", "CONFLICT (rename/delete): mind/"))
                               for line in conflicts):
            self.counts.person["git pull stopped at a memory deleted on one side, counted or archived on the other "
                               "(aborted)"] += 1
            git(self.root, "merge", "--abort", check=False)
        elif "CONFLICT" in said or "fix conflicts" in said:
            self.counts.problems.append(f"the person's git pull conflicted: {said.strip()[-400:]}")
            git(self.root, "merge", "--abort", check=False)
        else:
            self.counts.person["git pull retried (git busy)"] += 1

    def delete_memory(self) -> None:
        """A memory the person finds wrong, deleted with `git rm` and committed: it must not
        come back, whatever the agent says later."""
        paths = [p for p in git(self.root, "ls-files", "mind/facts").stdout.split() if p.endswith(".md")]
        if not paths:
            return
        rel = self.rnd.choice(paths)
        try:
            body = (self.root / rel).read_text().split("\n---\n", 1)[-1].strip()
        except OSError:
            return  # moved meanwhile (archived by cortex)
        if git(self.root, "rm", "-q", rel, check=False).returncode != 0:
            self.counts.person["git rm retried (git busy, or archived meanwhile)"] += 1
            return
        self.deleting[rel] = body
        self.commit("-m", f"person: delete {rel}", kind="git rm of a memory")

    def step(self, remote: bool = False) -> None:
        files = sorted(self.text)
        if self.rnd.random() < 0.08:
            self.delete_memory()
            return
        choice = self.rnd.random()
        if remote and choice < 0.1:
            self.pull()
        elif choice < 0.3 or not files:  # a new note, staged and committed
            rel = f"people/note-{len(files)}.md"
            self.write(rel)
            if self.add(rel):
                if STRACE and self.rnd.random() < 0.5:  # by a git slow between its read of the index and its lock
                    self.commit("-m", f"person: add {rel}", kind="git commit (new note, slow git)", slow=True)
                else:
                    self.commit("-m", f"person: add {rel}", kind="git commit (new note)")
        elif choice < 0.55:  # edit every file, `git commit -a`
            for rel in files:
                self.write(rel)
            self.commit("-a", "-m", "person: edit all", kind="git commit -a")
        elif choice < 0.8:  # a plain commit with a slow editor
            rel = self.rnd.choice(files)
            self.write(rel)
            if self.add(rel):
                env = {**os.environ, "GIT_EDITOR": EDITOR}
                self.commit(env=env, kind="git commit (slow editor)")
        elif len(files) >= 2:  # one file committed, another left with unstaged edits
            staged, unstaged = self.rnd.sample(files, 2)
            self.write(staged)
            self.write(unstaged)
            if self.add(staged):
                self.commit("-m", f"person: {staged}", kind="git commit (unstaged edits stashed)")
        self.check_working_tree()

    def check_working_tree(self) -> None:
        for rel, text in self.text.items():
            now = (self.root / rel).read_text() if (self.root / rel).exists() else None
            if now != text:
                self.counts.problems.append(f"{rel}: the person's edit was lost or reverted")
                self.text[rel] = now or ""


def agent(root: Path, stop: threading.Event, counts: Counts, rnd: random.Random, who: str = "Soak worker") -> None:
    buffer = root / "observer" / "observations.jsonl"
    while not stop.is_set():
        if counts.deleted and rnd.random() < 0.1:  # says again what the person deleted
            line = {"timestamp": "2026-02-17T09:00:00.000Z", "bucket": "explicit", "type": "fact",
                    "body": rnd.choice(counts.deleted), "attribution": "soak-agent", "session_id": "cli"}
            with open(buffer, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")
            counts.cortex["a deleted memory said again"] += 1
            time.sleep(0.05)
            continue
        n = counts.observations
        line = {"timestamp": "2026-02-16T15:23:14.527Z", "bucket": "explicit", "type": "fact",
                "body": f"{who} {n} finished batch {rnd.randrange(10**6)} in {n % 90 + 5} seconds.",
                "attribution": "soak-agent", "session_id": "cli"}
        with open(buffer, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
        counts.observations += 1
        time.sleep(0.05)


def cortex_loop(root: Path, stop: threading.Event, counts: Counts, rnd: random.Random, remote: bool = False) -> None:
    while not stop.is_set():
        pick = rnd.random()
        args = ("maintain", "--force") if pick < 0.15 else ("sync",) if remote and pick < 0.35 else ("run",)
        started = time.monotonic()
        done = cortex(root, *args)
        if os.environ.get("SOAK_VERBOSE"):
            print(f"cortex {' '.join(args)}: exit {done.returncode} after {time.monotonic() - started:.1f} s")
        counts.cortex[f"cortex {args[0]} exit {done.returncode}"] += 1
        if os.environ.get("SOAK_VERBOSE") and done.returncode:
            print(f"cortex {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
        if done.returncode not in (0, 75):
            counts.problems.append(f"cortex {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
        if remote:
            time.sleep(rnd.uniform(0.0, 0.3))  # two machines share the remote: not a tight loop


def reader(root: Path, stop: threading.Event, counts: Counts, rnd: random.Random) -> None:
    """An agent asking as it works (with ``--watch``: through the watcher, which answers
    the queries itself once its index is loaded): a query finds or finds nothing, status
    answers; never an error."""
    while not stop.is_set():
        args = rnd.choice([("query", "which soak worker finished its batch", "--json"), ("status", "--json"),
                           ("index",)])
        done = cortex(root, *args)
        counts.cortex[f"cortex {args[0]} exit {done.returncode}"] += 1
        if done.returncode not in ((0, 1) if args[0] == "query" else (0,)):
            counts.problems.append(f"cortex {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
        time.sleep(rnd.uniform(0.05, 0.3))


def note_bodies(root: Path, active: bool = False) -> set[str]:
    paths = git(root, "ls-tree", "-r", "--name-only", "HEAD").stdout.split()
    bodies = set()
    for rel in paths:
        if rel.startswith(("mind/", "vault/")) and rel.endswith(".md") and not (active and rel.startswith("mind/archive/")):
            text = git(root, "show", f"HEAD:{rel}").stdout
            bodies.add(text.split("\n---\n", 1)[-1].strip())
    return bodies


def soak(root: Path, seconds: float, seed: int = 0, watch: bool = False, remote: bool = False,
         until=None) -> Counts:
    """Run the soak on a fresh vault at ``root``; returns the counts (problems included).
    ``watch``: with ``cortex watch`` running and an agent querying beside the rest.
    ``remote``: with a second machine sharing a bare remote (beside ``root``).
    ``until``: a test of the counts the soak goes on past ``seconds`` for (up to four times
    as long), so that a busy machine does as much as a quiet one."""
    init = subprocess.run([str(BIN / "cortex"), "init", str(root)], capture_output=True, text=True)
    assert init.returncode == 0, init.stderr
    other = root.parent / f"{root.name}-teammate"
    if remote:
        bare = root.parent / f"{root.name}-remote.git"
        git(root.parent, "init", "-q", "--bare", "-b", "main", str(bare))
        git(root, "remote", "add", "origin", str(bare))
        git(root, "push", "-q", "-u", "origin", "main")
        cloned = subprocess.run([str(BIN / "cortex"), "clone", str(bare), str(other)], capture_output=True, text=True)
        assert cloned.returncode == 0, cloned.stderr
    if watch:
        started = cortex(root, "watch", "--background")
        assert started.returncode == 0, started.stderr
    config = root / "observer" / "config.yml"
    config.write_text(config.read_text() + "\nlock_timeout: 2\n")  # give way to the person sooner
    counts = Counts()
    # the other machine's agent counts its own observations, and says again what the person deleted too
    teammate = Counts(problems=counts.problems, deleted=counts.deleted)
    rnd = random.Random(seed)
    person = Person(root, random.Random(seed + 1), counts)
    stop = threading.Event()
    workers = [threading.Thread(target=agent, args=(root, stop, counts, random.Random(seed + 2))),
               threading.Thread(target=cortex_loop, args=(root, stop, counts, rnd, remote))]
    if watch:
        workers.append(threading.Thread(target=reader, args=(root, stop, counts, random.Random(seed + 3))))
    if remote:
        workers += [threading.Thread(target=agent, args=(other, stop, teammate, random.Random(seed + 4), "Teammate worker")),
                    threading.Thread(target=cortex_loop, args=(other, stop, teammate, random.Random(seed + 5), True))]
    for worker in workers:
        worker.start()
    start = time.monotonic()
    try:
        while (time.monotonic() < start + seconds
               or (until is not None and not until(counts) and time.monotonic() < start + 4 * seconds)):
            person.step(remote)
            time.sleep(person.rnd.uniform(0.1, 0.6))  # a person pauses between commits
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    # The person commits what is left; cortex drains the buffer.
    if person.text:
        git(root, "add", *sorted(person.text))
        person.staged.update(person.text)
        person.commit("-m", "person: last", kind="git commit (last)")
    for machine in (root, other) if remote else (root,):
        for _ in range(10):
            done = cortex(machine, "run", "--json")
            if done.returncode == 0 and json.loads(done.stdout)["read"] == 0:
                break
    if remote:
        converge(root, other, counts)
        for what, n in teammate.cortex.items():
            counts.cortex[f"teammate: {what}"] += n
        counts.cortex["teammate: observations"] = teammate.observations
    try:
        verify(root, person, counts, also=(other, teammate.observations) if remote else None)
        if watch:
            verify_index(root, counts)
    finally:
        if watch:
            seen = cortex(root, "watch", "--status", "--json")
            daemon = json.loads(seen.stdout).get("daemon") or {} if seen.returncode == 0 else {}
            counts.cortex["watcher answers with paths"] = daemon.get("answered", {}).get("paths", 0)
            served = daemon.get("queries", {})
            counts.cortex["queries the watcher answered"] = served.get("served", 0)
            counts.cortex["queries it left to the query"] = served.get("declined", 0)
            if not served.get("served"):
                counts.problems.append(f"the watcher answered no query: {served}")
            cortex(root, "watch", "--stop")
    return counts


def verify_index(root: Path, counts: Counts) -> None:
    """After it all, the search index holds every note as it is on disk, and the notes
    it records as differing from HEAD are those git finds."""
    done = cortex(root, "index")
    if done.returncode != 0:
        counts.problems.append(f"cortex index exited {done.returncode}: {done.stderr.strip()[-400:]}")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from cortex.layout import is_note_path
    from cortex.search.index import SearchIndex, walk_notes
    from cortex.search.records import content_hash

    index = SearchIndex(root)
    index.load(vectors=False)
    try:
        indexed = {f["path"]: f["hash"] for f in index.lexical.searcher.all_stored_fields()}
        dirty = index.state.dirty
    finally:
        index.close()
    on_disk = {p: content_hash((root / p).read_bytes()) for p in walk_notes(root)}
    if indexed != on_disk:
        wrong = sorted(set(indexed.items()) ^ set(on_disk.items()))[:5]
        counts.problems.append(f"the search index differs from the notes on disk: {wrong}")
    differ = {p for p in git(root, "diff", "--name-only", "HEAD").stdout.splitlines()
              + git(root, "ls-files", "--others", "--exclude-standard").stdout.splitlines() if is_note_path(p)}
    if dirty is not None and set(dirty) != differ:
        counts.problems.append(f"the index's dirty list {sorted(dirty)[:5]} is not git's {sorted(differ)[:5]}")


def converge(root: Path, other: Path, counts: Counts) -> None:
    """Sync both machines until they hold one tree (each may give way to the other's
    lock or push once or twice)."""
    for _ in range(6):
        for machine in (other, root):
            done = cortex(machine, "sync")
            if done.returncode not in (0, 75):
                counts.problems.append(f"final cortex sync on {machine.name} exited {done.returncode}: "
                                       f"{done.stderr.strip()[-400:]}")
                return
        trees = {git(m, "rev-parse", "HEAD^{tree}").stdout for m in (root, other)}
        if len(trees) == 1:
            return
    counts.problems.append("the two machines did not converge to one tree")


def settled_twins(root: Path) -> set[str]:
    """The notes a settle deleted as memorized anew where the person had deleted them."""
    log = git(root, "log", "--format=%B", "--grep=^settle: ").stdout
    return {line.split(" deleted (the memory deleted as ", 1)[0] for line in log.splitlines()
            if " deleted (the memory deleted as " in line}


def verify(root: Path, person: Person, counts: Counts, also: tuple[Path, int] | None = None) -> None:
    problems = counts.problems
    person.check_working_tree()
    for rel, text in person.committed.items():
        at_head = git(root, "show", f"HEAD:{rel}", check=False).stdout
        if at_head != text:
            history = git(root, "log", "--format=%h %an: %s", "--", rel).stdout.strip().replace("\n", " | ")
            problems.append(f"{rel}: HEAD does not hold the person's last commit "
                            f"(HEAD has {at_head[-40:]!r}, the person committed {text[-40:]!r}; log: {history})")
    log = git(root, "log", "--format=@%an|%s", "--name-status", "--no-renames").stdout
    twins = settled_twins(root)
    for commit in ("\n" + log).split("\n@")[1:]:
        head, _, names = commit.partition("\n")
        author, subject = head.split("|", 1)
        status = [line.split("\t", 1) for line in names.splitlines() if "\t" in line]
        archived_to = {path.rsplit("/", 1)[-1] for kind, path in status if kind == "A" and path.startswith("mind/archive/")}
        for kind, path in status:
            if kind != "D":
                continue
            if author == "Test Person" and path in person.deleted_paths:
                continue  # the person's own `git rm`
            if subject.startswith("settle:") and path in twins:
                continue  # memorized anew where the person had deleted it
            moved = subject.startswith(("decay:", "dedup:")) or (subject.startswith("settle:")
                                                                and path.rsplit("/", 1)[-1] in archived_to)
            if author == "Test Person" or (not moved and path.startswith(("mind/", "vault/", "people/"))):
                problems.append(f"{path} deleted by {author!r} in {subject!r}")
    bodies = note_bodies(root)
    back = set(counts.deleted) & note_bodies(root, active=True)
    if back:
        problems.append(f"{len(back)} memories the person deleted are back: {sorted(back)[:3]}")
    counts.cortex["syncs that kept a deletion (only counted elsewhere)"] = git(
        root, "log", "--oneline", "--grep=only counted on the other: kept deleted").stdout.count("\n")
    counts.cortex["memories memorized anew elsewhere, deleted by the settle"] = len(settled_twins(root))
    quarantine = root / "observer" / "quarantine.jsonl"
    counts.cortex["repeats held (the person deleted them)"] = sum(  # each entry counts its repeats
        int(entry.get("count", 1)) for entry in (json.loads(line) for line in (quarantine.read_text().splitlines()
                                                                              if quarantine.exists() else []) if line.strip())
        if entry.get("reason") == "deleted")
    for machine, observed in [(root, counts.observations), *([also] if also else [])]:
        buffer_lines = []
        for source in [machine / "observer" / "observations.jsonl",
                       *sorted((machine / "observer" / "archive").glob("*.jsonl*"))]:
            if source.exists():
                buffer_lines += source.read_text().splitlines()
        wanted = {json.loads(line)["body"] for line in buffer_lines if line.strip()}
        missing = wanted - bodies - set(counts.deleted)  # every machine's observations are notes of this one
        if len(wanted) < observed or missing:
            problems.append(f"{machine.name}: {len(missing)} observations are in no note; "
                            f"{observed - len(wanted)} not in the buffer or archive")
    if git(root, "diff", "--cached", "--name-only").stdout:
        problems.append("the index does not agree with HEAD")
    fsck = git(root, "fsck", "--no-progress", check=False)
    if fsck.returncode != 0 or "error" in (fsck.stdout + fsck.stderr).lower():
        problems.append(f"git fsck: {fsck.stdout}{fsck.stderr}")


def main() -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 120)))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--watch", action="store_true", help="With `cortex watch` running and an agent querying.")
    parser.add_argument("--remote", action="store_true",
                        help="With a second machine sharing a bare remote, and `cortex sync` and `git pull` beside the rest.")
    parser.add_argument("--keep", metavar="DIR", help="Where to copy the vault when there are problems.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        os.environ.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", PRE_COMMIT_HOME=str(home / ".pre-commit"),
                          GIT_AUTHOR_NAME="Test Person", GIT_AUTHOR_EMAIL="person@example.com",
                          GIT_COMMITTER_NAME="Test Person", GIT_COMMITTER_EMAIL="person@example.com",
                          PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        started = time.monotonic()
        counts = soak(Path(tmp) / "vault", args.seconds, args.seed, watch=args.watch, remote=args.remote)
        print(f"soak: {time.monotonic() - started:.0f} s, {counts.observations} observations")
        for what, n in sorted({**counts.person, **counts.cortex}.items()):
            print(f"  {n:6d}  {what}")
        print(f"  problems: {len(counts.problems)}")
        for problem in counts.problems:
            print(f"    {problem}")
        if counts.problems and args.keep:
            import shutil

            if args.remote:  # both machines and the remote
                shutil.copytree(Path(tmp), args.keep, symlinks=True, ignore=shutil.ignore_patterns("home"))
            else:
                shutil.copytree(Path(tmp) / "vault", args.keep, symlinks=True)
            print(f"  the vault is kept in {args.keep}")
    return 1 if counts.problems else 0


if __name__ == "__main__":
    sys.exit(main())
