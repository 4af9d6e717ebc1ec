"""Writes bench/data/floor_nonsense.jsonl: queries that should find nothing in any vault.

Deterministic (one seeded generator), so the file can be regenerated and compared:

    .venv/bin/python bench/floor_queries.py

Three kinds, as a person or a script produces them by mistake:

* `letters`: random lowercase strings, one to three "words" of 3 to 10 letters;
* `mash`: keyboard mash, runs and random walks over neighbouring keys of a QWERTY
  keyboard ("asdfgh", "kjhkjh lkj");
* `salad`: three to five rare English words in random order, from the list below,
  which was written for this file (some of them do occur in a large corpus: a salad
  that shares one rare word with a note is exactly the noise a floor must reject).

The unanswerable questions (bench/data/floor_unrelated.jsonl) were written by hand.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "floor_nonsense.jsonl"
SEED = 15
PER_KIND = 120

ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")

RARE_WORDS = """
abstemious accoutrement adumbrate alacrity anachronism antediluvian aplomb apocryphal
arboreal archipelago asseverate bailiwick bandicoot barnacle bathysphere bellwether
blandishment bloviate bombazine brouhaha bucolic cacophony callipygian cantilever
capybara carapace catafalque chiaroscuro chthonic circumlocution clavichord cockatrice
codicil conflagration contumely cormorant crenellation cuirass curmudgeon dalliance
defenestrate deliquesce demiurge dirigible doggerel ebullient effulgent eldritch
empyrean ephemeris equinox escutcheon esoteric farrago fenestration filigree flibbertigibbet
fulminate gadzooks galleon gazebo gerrymander gewgaw glockenspiel gossamer grandiloquent
gryphon halcyon harbinger hellebore hoosegow hornswoggle ignominious imbroglio
impecunious inchoate jabberwocky jackanapes juggernaut kerfuffle kowtow labyrinthine
lachrymose lackadaisical lagniappe leviathan lickspittle loquacious lugubrious
macadamia maelstrom malapropism marzipan mellifluous mendacious mizzenmast mollycoddle
mountebank nefarious nincompoop oubliette obfuscate ocelot onomatopoeia ossuary
palimpsest pandemonium panjandrum parsimonious peregrine persnickety phantasmagoria
philtrum pinnacle platypus poltergeist portmanteau quagmire quibble quixotic
rambunctious rapscallion recalcitrant rigmarole sarsaparilla scallywag serendipity
shenanigans skedaddle snollygoster sobriquet soliloquy spelunker susurrus sycophant
tatterdemalion thingamajig tintinnabulation troglodyte umbrage vellichor verisimilitude
vicissitude whippersnapper widdershins wunderkind xylophone yeoman zeitgeist zephyr
ziggurat
""".split()


def letters(rng: random.Random) -> str:
    return " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 10)))
                    for _ in range(rng.randint(1, 3)))


def _neighbours(key: str) -> list[str]:
    row = next(r for r in ROWS if key in r)
    i = row.index(key)
    return [row[j] for j in (i - 1, i + 1) if 0 <= j < len(row)]


def mash(rng: random.Random) -> str:
    words = []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.4:  # a run along one row
            row = rng.choice(ROWS)
            start = rng.randrange(len(row) - 3)
            words.append(row[start:start + rng.randint(3, min(8, len(row) - start))])
            continue
        key = rng.choice(rng.choice(ROWS))
        word = [key]
        for _ in range(rng.randint(2, 8)):
            key = rng.choice(_neighbours(key))
            word.append(key)
        words.append("".join(word))
    return " ".join(words)


def salad(rng: random.Random) -> str:
    return " ".join(rng.sample(RARE_WORDS, rng.randint(3, 5)))


def generate() -> list[dict]:
    rng = random.Random(SEED)
    out = []
    for kind, make in (("letters", letters), ("mash", mash), ("salad", salad)):
        seen = set()
        while len(seen) < PER_KIND:
            text = make(rng)
            if text not in seen:
                seen.add(text)
                out.append({"qid": f"{kind}-{len(seen):03d}", "question": text, "kind": kind})
    return out


def main() -> int:
    rows = generate()
    OUT.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(rows)} queries -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
