"""The relevance floor and the absolute scores (docs/query.md, "Scores"): a query that
matches nothing in the vault finds nothing (exit 1), a real one still finds its note,
`--min-score 0` lets the noise back, and the numbers shown mean the same whatever else
the vault holds. Real vaults, and the real CLI in a subprocess for the exit status."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_search import ENV, commit_all, git, write_note

from cortex.cli import main
from cortex.vault import Vault

NOTES = {
    "db": ("vault/decisions/db.md", "Use PostgreSQL for the analytics database instead of MySQL", "decision"),
    "coffee": ("mind/preferences/coffee.md", "I take my coffee black, from the roaster on Elm Street", "preference"),
    "deploy": ("mind/facts/deploy.md", "Deploys to production happen on Tuesday mornings after the standup", "fact"),
    "rust": ("vault/decisions/rust.md", "Adopt Rust for the telemetry collector service", "decision"),
}


@pytest.fixture(scope="module")
def vault(tmp_path_factory):
    v, _ = Vault.init(tmp_path_factory.mktemp("floor") / "v")
    for rel, body, type_ in NOTES.values():
        write_note(v.root, rel, body, type_=type_)
    commit_all(v.root)
    return v.root


def cortex(vault, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cortex", "--vault", str(vault), "query", *args],
                          env=ENV, capture_output=True, text=True)


@pytest.mark.parametrize("text", ["zzzqqq", "asdfgh jkl", "qwpxmv trzlk", "capybara marzipan ziggurat"])
def test_nonsense_exits_1_with_empty_output(vault, text):
    for fmt in ((), ("--paths",), ("--jsonl",)):
        done = cortex(vault, text, *fmt)
        assert done.returncode == 1, (text, fmt, done.stdout)
        assert done.stdout == ""
    done = cortex(vault, text, "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["count"] == 0


def test_a_real_query_still_exits_0(vault):
    done = cortex(vault, "which database did we choose", "--paths")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == NOTES["db"][0]


def test_a_question_with_was_or_they_matches_as_one_without(vault):
    """"which database was it" asks what "which database" asks: its "was", stemmed to
    "wa" and in no note, stayed a term and halved the note's matched share (0.46)."""
    for text in ("which database", "which database was it"):
        done = cortex(vault, text, "--json", "--limit", "1")
        assert done.returncode == 0, done.stderr
        hit = json.loads(done.stdout)["results"][0]
        assert hit["path"] == NOTES["db"][0] and hit["why"]["matched"] == 1.0
    alone = json.loads(cortex(vault, "database mysql pick", "--json").stdout)["results"][0]["why"]
    asked = json.loads(cortex(vault, "which database did they pick, was it MySQL", "--json").stdout)["results"][0]["why"]
    assert asked["matched"] == alone["matched"] and asked["lexical"] == alone["lexical"]


def test_min_score_0_returns_the_noise_hit(vault):
    assert cortex(vault, "zzzqqq", "--paths").returncode == 1
    done = cortex(vault, "zzzqqq", "--paths", "--min-score", "0")
    assert done.returncode == 0 and done.stdout.strip()
    # and a floor above every note's relevance finds nothing
    assert cortex(vault, "which database did we choose", "--min-score", "0.99").returncode == 1
    # off the 0..1 scale: a usage error, not "nothing found"
    wrong = cortex(vault, "which database did we choose", "--min-score", "5")
    assert wrong.returncode == 2 and "0.0<=x<=1.0" in wrong.stderr


def test_a_query_in_latin1_is_a_usage_error_not_a_crash(vault):
    """`cortex query "$(cat notes-latin1.txt)"`: the byte 0xE9 reaches Python as U+DCE9,
    which the tokenizer refused with a traceback (exit 3)."""
    latin1 = "caf\udce9 database"  # passed to the child as the bytes b"caf\xe9 database"
    done = cortex(vault, latin1)
    assert done.returncode == 2 and "TEXT: the byte 0xE9 at character 4 is not UTF-8" in done.stderr, done.stderr
    as_json = cortex(vault, latin1, "--json")
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["error"] == "usage"
    tagged = cortex(vault, "database", "--tag", "caf\udce9")
    assert tagged.returncode == 2 and "--tag: the byte 0xE9 at character 4" in tagged.stderr, tagged.stderr


def test_an_unrelated_question_sharing_one_word_finds_nothing(vault, capsys):
    # "production" is in one note; the question's other words are in none
    assert main(["--vault", str(vault), "query", "what is the production budget of the sequel film", "--paths"]) == 1
    assert capsys.readouterr().out == ""


JSON_KEYS = {"rank", "path", "id", "title", "type", "category", "partition", "archived", "tags", "entities",
             "attribution", "created", "snippet", "score", "why", "via", "when"}


def test_json_shape_and_scale(vault, capsys):
    assert main(["--vault", str(vault), "query", "telemetry collector language", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"query", "mode", "count", "results", "index"}
    top = data["results"][0]
    assert set(top) == JSON_KEYS and top["path"] == NOTES["rust"][0]
    why = top["why"]
    assert {"lexical", "semantic", "matched", "relevance", "effective_importance", "confidence", "recency",
            "prior"} <= set(why)
    for key in ("lexical", "semantic", "matched", "relevance"):
        assert 0.0 <= why[key] <= 1.0
    assert 0.5 < why["matched"] < 1.0  # two of the three words (idf-weighted)
    assert abs(why["relevance"] - (0.93 * why["lexical"] + 0.07 * why["semantic"])) < 1e-3


def test_scores_do_not_depend_on_the_other_results(vault, capsys):
    """Min-max scaling gave the top lexical hit 1.0 whatever it matched: now a note's
    lexical score is the same whether it comes first or alone."""
    v = ["--vault", str(vault), "query", "--json", "--lexical-only", "--min-score", "0"]
    assert main([*v, "coffee roaster production"]) == 0
    both = {r["path"]: r["why"]["lexical"] for r in json.loads(capsys.readouterr().out)["results"]}
    assert main([*v, "coffee roaster production", "--type", "preference"]) == 0
    alone = {r["path"]: r["why"]["lexical"] for r in json.loads(capsys.readouterr().out)["results"]}
    assert alone[NOTES["coffee"][0]] == both[NOTES["coffee"][0]] < 1.0


def test_text_output_shows_partial_matches_and_no_timestamps(vault, capsys):
    assert main(["--vault", str(vault), "query", "analytics database vendor", "--lexical-only"]) == 0
    out = capsys.readouterr().out
    assert "lexical 0.00" not in out and "matched 0." in out and "relevance 0." in out
    assert main(["--vault", str(vault), "query", "--recent", "100000d"]) == 0
    assert "score" not in capsys.readouterr().out


def test_python_api_takes_min_score(vault):
    from cortex.search.question import Question
    from cortex.search.session import Session

    session = Session(vault)
    session.open()
    assert session.ask(Question("zzzqqq")).hits == []
    assert session.ask(Question("zzzqqq", min_score=0.0)).hits
    assert session.ask(Question("telemetry collector")).hits[0].path == NOTES["rust"][0]


def test_a_question_only_a_word_of_which_the_vault_knows_is_not_answered(vault):
    """The answer gate (fusion.answers): a note sharing one word of a long question is not
    an answer by default; a note speaking of most of it is; `--min-score` replaces the gate."""
    question = "when does the municipal swimming pool reopen after the winter production maintenance"
    done = cortex(vault, question, "--json", "--min-score", "0.01")
    whys = [r["why"] for r in json.loads(done.stdout)["results"]]
    assert done.returncode == 0 and any("matched" in w for w in whys)  # found by a word or two in common
    assert max(w.get("matched", 0.0) for w in whys) < 0.2
    done = cortex(vault, question, "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["count"] == 0
    done = cortex(vault, "when do deploys to production happen", "--paths")
    assert done.returncode == 0 and done.stdout.splitlines()[0] == NOTES["deploy"][0]


def test_in_a_vault_of_a_few_notes_a_partial_match_is_an_answer():
    """idf cannot rank words in a vault of a handful of notes: there a note matching
    enough of the query passes the gate on that alone; in a large vault the same
    evidence (one word of two, low relevance, a middling cosine) is not an answer, and a
    note matching too little of the query is none in either."""
    from cortex.search import fusion

    partial = {"lexical": 0.11, "semantic": 0.47, "matched": 0.23, "relevance": 0.13}
    assert fusion.answers("hybrid", None, [partial], notes=1)
    assert fusion.answers("lexical", None, [partial], notes=fusion.SMALL_VAULT - 1)
    assert not fusion.answers("hybrid", None, [partial], notes=fusion.SMALL_VAULT)
    assert not fusion.answers("hybrid", None, [{**partial, "matched": 0.1}], notes=1)
    assert fusion.answers("hybrid", 0.0, [{**partial, "matched": 0.1}], notes=5000)  # --min-score: the caller's floor


def test_a_name_a_note_holds_whole_is_an_answer_whatever_the_embedding_says(tmp_path, ready_vault):
    """A query of a name or a code ("Ingrid Quist") has no meaning a static embedding can
    place: a note that names it in passing answers it, in a vault large enough for the
    answer gate; one word of the name is not the name, and a longer question about
    something else still finds nothing."""
    v = Vault(ready_vault(tmp_path / "v"))
    for i in range(60):  # past SMALL_VAULT: the gate judges by evidence
        write_note(v.root, f"mind/facts/f{i}.md", f"The harbour ferry {i} leaves the pier at {i % 12 + 6} o'clock.",
                   type_="fact")
    write_note(v.root, "mind/opinions/fastapi.md", "Maya finds FastAPI's dependency injection fine for request-scoped "
               "database sessions but too magical, says Ingrid Quist, for anything else.", type_="opinion")
    write_note(v.root, "mind/facts/ingrid.md", "Ingrid joined the harbour office in May.", type_="fact")
    commit_all(v.root)
    done = cortex(v.root, "Ingrid Quist", "--json")
    assert done.returncode == 0, done.stdout
    results = json.loads(done.stdout)["results"]
    assert results[0]["path"] == "mind/opinions/fastapi.md" and results[0]["why"]["semantic"] < 0.35
    assert cortex(v.root, "Quist", "--paths").stdout.splitlines() == ["mind/opinions/fastapi.md"]
    assert cortex(v.root, "which pharmacy near the harbour opens on sunday mornings", "--paths").returncode == 1


def test_a_note_holding_every_word_of_the_query_answers_whatever_its_cosine():
    from cortex.search import fusion

    named = {"lexical": 0.42, "semantic": 0.31, "matched": 1.0, "relevance": 0.42}
    far = lambda i: 0.2  # noqa: E731  (a cosine under ANSWER_MEANING)
    assert fusion.answers("hybrid", None, [named], notes=5000, meaning_of=far)
    assert not fusion.answers("hybrid", None, [{**named, "matched": 0.6}], notes=5000, meaning_of=far)
    assert fusion.answers("hybrid", None, [{**named, "matched": 0.6}], notes=5000, meaning_of=lambda i: 0.4)


def test_the_note_that_answers_by_its_words_must_also_be_about_the_question():
    """Where the embedding is at hand, a note matching the question's words is an answer
    only if its cosine with the question reaches ANSWER_MEANING; the lookup is asked of
    the results that answer by their words only, and not at all in lexical mode."""
    from cortex.search import fusion

    worded = {"lexical": 0.4, "matched": 0.6, "relevance": 0.37}
    asked: list[int] = []

    def meaning_of(cosines):
        def lookup(i):
            asked.append(i)
            return cosines[i]
        return lookup

    weak = {"lexical": 0.05, "matched": 0.1, "relevance": 0.05}
    assert not fusion.answers("hybrid", None, [weak, worded], notes=5000, meaning_of=meaning_of([0.9, 0.2]))
    assert asked == [1]  # the weak result was never looked up
    assert fusion.answers("hybrid", None, [weak, worded], notes=5000, meaning_of=meaning_of([0.9, fusion.ANSWER_MEANING]))
    assert fusion.answers("lexical", None, [worded], notes=5000)  # no embedding: words alone
    assert fusion.answers("hybrid", None, [worded], notes=5000, meaning_of=lambda i: None)  # a note with no vector
    assert fusion.answers("hybrid", None, [{**worded, "semantic": 0.6}], notes=5000, meaning_of=lambda i: 0.6)


def test_a_question_holding_a_rare_word_no_note_has_needs_a_note_about_it(tmp_path, ready_vault):
    """A rare word the vault has never seen ("sitar") says the question is about something
    the vault does not know: the note sharing its other words ("tune", on guitar tunings,
    cosine ~0.41 with the question) is not an answer. An everyday word no note has
    ("pike") says nothing of the kind: that question still finds the note on lures, and a
    question whose words the vault knows is judged as before (docs/query.md, "Scores")."""
    v = Vault(ready_vault(tmp_path / "v"))
    for i in range(60):  # past SMALL_VAULT: the gate judges by evidence
        write_note(v.root, f"mind/facts/f{i}.md", f"The harbour ferry {i} leaves the pier at {i % 12 + 6} o'clock.",
                   type_="fact")
    write_note(v.root, "mind/facts/guitar.md", "I keep the guitar in open D tuning for the folk set on Fridays.",
               type_="fact")
    write_note(v.root, "mind/facts/lures.md", "Rasmus is trying new lures for bass fishing at the reservoir.",
               type_="fact")
    commit_all(v.root)

    noise = cortex(v.root, "How do I tune a sitar?", "--json", "--min-score", "0", "--limit", "1")
    why = json.loads(noise.stdout)["results"][0]["why"]
    # what the gate without this rule accepted: enough words, enough relevance, a cosine over ANSWER_MEANING
    assert why["matched"] >= 0.2 and why["relevance"] >= 0.15 and 0.35 <= why["semantic"] < 0.5, why
    done = cortex(v.root, "How do I tune a sitar?", "--paths")
    assert done.returncode == 1 and done.stdout == ""

    done = cortex(v.root, "What's the best lure for catching pike?", "--paths")
    assert done.returncode == 0 and done.stdout.splitlines()[0] == "mind/facts/lures.md"
    done = cortex(v.root, "which guitar tuning do I keep for the folk set", "--paths")
    assert done.returncode == 0 and done.stdout.splitlines()[0] == "mind/facts/guitar.md"


def test_a_rare_word_no_note_has_raises_the_meaning_asked():
    from cortex.search import fusion

    worded = {"lexical": 0.2, "matched": 0.46, "relevance": 0.22}
    between = lambda i: 0.41  # noqa: E731  (over ANSWER_MEANING, under ANSWER_UNSEEN_MEANING)
    assert fusion.answers("hybrid", None, [worded], notes=5000, meaning_of=between)
    assert not fusion.answers("hybrid", None, [worded], notes=5000, meaning_of=between, unseen=1)
    assert fusion.answers("hybrid", None, [worded], notes=5000, meaning_of=lambda i: fusion.ANSWER_UNSEEN_MEANING,
                          unseen=1)
    assert fusion.answers("lexical", None, [worded], notes=5000, unseen=1)  # no embedding: words alone
    assert fusion.answers("hybrid", None, [worded], notes=fusion.SMALL_VAULT - 1, meaning_of=between,
                          unseen=1)  # a small vault lacks most words: matched alone, as before


def test_a_small_vault_returns_a_note_found_by_meaning_alone(tmp_path, ready_vault):
    """In a vault of a few hundred notes a close embedding is rarely chance
    (`fusion.semantic_share`): once the query is answered, a note sharing no word with it
    but close in meaning (cosine over MIN_COSINE: spinners and jigs for pike, asked about
    lures for bass) comes back after the note that answers by its words; its relevance
    stays under the floor, so an explicit `--min-score` and `--lexical-only` leave it out."""
    v = Vault(ready_vault(tmp_path / "v"))
    for i in range(60):
        write_note(v.root, f"mind/facts/f{i}.md", f"The harbour ferry {i} leaves the pier at {i % 12 + 6} o'clock.",
                   type_="fact")
    write_note(v.root, "mind/facts/lures.md", "Rasmus is trying new lures for bass fishing at the reservoir.",
               type_="fact")
    write_note(v.root, "mind/facts/angling.md", "Spinners and soft plastic jigs work best for catching perch and "
               "pike in the lake.", type_="fact")
    commit_all(v.root)
    done = cortex(v.root, "Which lures does Rasmus use for bass?", "--json")
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert [r["path"] for r in results] == ["mind/facts/lures.md", "mind/facts/angling.md"]
    angling = results[1]["why"]
    assert "lexical" not in angling and angling["semantic"] >= 0.5 and angling["relevance"] < 0.1
    for extra in (("--min-score", "0.1"), ("--lexical-only",)):
        done = cortex(v.root, "Which lures does Rasmus use for bass?", "--paths", *extra)
        assert done.stdout.splitlines() == ["mind/facts/lures.md"], extra
    # nonsense is still refused whole: the gate, not the order, decides whether to answer
    assert cortex(v.root, "zzzqqq", "--paths").returncode == 1


def test_the_share_of_meaning_in_the_order_falls_with_the_vaults_size():
    from cortex.search import fusion

    shares = [fusion.semantic_share(n) for n in (10, fusion.SHARE_SMALL, 900, 1200, fusion.SHARE_LARGE, 200_000)]
    assert shares[0] == shares[1] == fusion.SMALL_VAULT_SHARE
    assert shares[1] > shares[2] > shares[3] > shares[4]
    assert shares[4] == shares[5] == fusion.DEFAULT_WEIGHTS.semantic
    parts = {"lexical": 0.31, "semantic": 0.62}
    # from SHARE_LARGE notes on the order is the relevance itself: large vaults rank as before
    relevance = fusion.fuse({"n": 0.31}, {"n": 0.62})[0][1]
    assert fusion.fit(parts, fusion.order_weights(fusion.SHARE_LARGE)) == pytest.approx(relevance)
    assert fusion.fit({"semantic": 0.6}, fusion.order_weights(fusion.SHARE_SMALL)) == pytest.approx(0.18)


def test_a_long_note_holding_every_word_of_a_question_answers_it(tmp_path, ready_vault):
    """A person's daily note speaks of several things, so its embedding is far from a
    question about one of them (cosine ~0.2, under ANSWER_MEANING); holding every word of
    the question, it is the answer all the same (`fusion.WHOLE`)."""
    v = Vault(ready_vault(tmp_path / "v"))
    for i in range(60):  # past SMALL_VAULT: the gate judges by evidence
        write_note(v.root, f"mind/facts/f{i}.md", f"Shipment {i} of crane parts arrived at quay {i % 9}.", type_="fact")
    daily = v.root / "Daily notes" / "2026-11-26.md"
    daily.parent.mkdir()
    daily.write_text("Met [[Rasmus Holm]] about the #harbour/cranes budget. He wants the hoist rope swapped before "
                     "the December inspection.\n\n> [!note] Follow-up\n> Ask for the rope supplier's quote.\n"
                     "Rope quote received: 4,200 EUR.\n", encoding="utf-8")
    commit_all(v.root)
    git(v.root, "add", "-A")
    git(v.root, "commit", "-q", "--no-verify", "-m", "daily note")

    question = "what did Rasmus want swapped"
    why = json.loads(cortex(v.root, question, "--json", "--min-score", "0", "--limit", "1").stdout)["results"][0]["why"]
    assert why["matched"] >= 0.999 and why["semantic"] < 0.35, why  # every word, little meaning
    done = cortex(v.root, question, "--paths")
    assert done.returncode == 0 and done.stdout.splitlines()[0] == "Daily notes/2026-11-26.md"
    assert cortex(v.root, "what did Rasmus want painted", "--paths").returncode == 1  # a word it lacks


def test_feedback_brings_up_a_note_on_the_best_results_topic_and_answers_no_nonsense(tmp_path, ready_vault,
                                                                                        monkeypatch):
    """Pseudo-relevance feedback (`query.FEEDBACK_SHARE`, docs/query.md step 9): the best
    results of "what should I plant in the garden" are about tomatoes, so the note on
    basil beside the tomatoes, which shares only "garden" with the question and ranked
    under notes on the garden's gate and hose, comes up among them. Feedback reorders an
    answer and never makes one: nonsense still finds nothing (exit 1). In a small vault,
    whose order already weighs meaning more, it is left out."""
    from cortex.search import fusion, query
    from cortex.search.index import SearchIndex
    from cortex.search.query import search

    v = Vault(ready_vault(tmp_path / "v"))
    for i in range(60):
        write_note(v.root, f"mind/facts/f{i}.md", f"The harbour ferry {i} leaves the pier at {i % 12 + 6} o'clock.",
                   type_="fact")
    for i, body in enumerate(["Plant the tomatoes in the garden beds in May, once the frost is over.",
                              "The tomato seedlings go out to the vegetable garden after the last frost; plant them deep.",
                              "Plant courgettes and tomatoes in the sunny corner of the garden, water them daily."]):
        write_note(v.root, f"mind/facts/tomatoes{i}.md", body, type_="fact")
    write_note(v.root, "mind/facts/basil.md", "Basil and marigolds beside the tomatoes keep aphids off the vegetables "
               "in a garden.", type_="fact")
    for i, body in enumerate(["The garden party for the neighbours is on Saturday at noon, with a band.",
                              "Someone stole the garden gnome from the front porch last night.",
                              "The garden hose leaks at the tap by the back door.",
                              "The garden gate squeaks again and needs oil.",
                              "The folding garden chairs are stacked in the shed."]):
        write_note(v.root, f"mind/facts/garden{i}.md", body, type_="fact")
    commit_all(v.root)
    idx = SearchIndex(v.root)
    idx.rebuild()
    question = "what should I plant in the garden"
    assert all("feedback" not in h.why for h in search(idx, question))  # a small vault: the order trusts meaning
    # ranked as a vault past fusion.SHARE_LARGE notes is, whose order is the relevance
    monkeypatch.setattr(fusion, "SHARE_SMALL", 10)
    monkeypatch.setattr(fusion, "SHARE_LARGE", 20)
    with_feedback = search(idx, question, limit=4)
    monkeypatch.setattr(query, "FEEDBACK_SHARE", 0.0)
    first_pass = search(idx, question, limit=4)
    monkeypatch.setattr(query, "FEEDBACK_SHARE", 0.1)
    tomatoes = {f"mind/facts/tomatoes{i}.md" for i in range(3)}
    assert {h.path for h in first_pass[:3]} == {h.path for h in with_feedback[:3]} == tomatoes
    assert "mind/facts/basil.md" not in {h.path for h in first_pass}  # under notes on the garden's hose and gate
    assert with_feedback[3].path == "mind/facts/basil.md"
    basil = with_feedback[3].why
    assert basil["feedback"] > basil["semantic"]  # the moved query is closer to it than the question was
    assert search(idx, "zzzqqq") == [] and search(idx, "qwpxmv trzlk") == []
    assert search(idx, "zzzqqq", min_score=0)  # the noise is there: the gate, decided first, refuses it
