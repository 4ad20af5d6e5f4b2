"""Writes sharegpt_sample.json: a small ShareGPT-format dataset for tests (never downloaded).

`python tests/data/datasets/make_sample.py` regenerates it; the text is made from the fixed
phrases below (seeded), so the file is the same on every run. Shape as ShareGPT's public dumps:
a JSON list of {"id", "conversations": [{"from": "human"|"gpt", "value": ...}, ...]}. Row 4 has
no reply (ShareGPT readers skip it) and rows 2 and 7 have several turns.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SUBJECTS = ["the river", "a small town", "the old library", "my garden", "the night train"]
ASKS = ["Write two sentences about", "Describe", "Tell a short story about", "List facts about"]
WORDS = [
    "light",
    "water",
    "stone",
    "green",
    "quiet",
    "morning",
    "road",
    "window",
    "bread",
    "music",
    "paper",
    "winter",
]


def _reply(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words)).capitalize() + "."


def main() -> None:
    rng = random.Random(16)
    rows = []
    for i in range(12):
        prompt = f"{rng.choice(ASKS)} {rng.choice(SUBJECTS)}."
        turns = [{"from": "human", "value": prompt}]
        if i != 4:
            turns.append({"from": "gpt", "value": _reply(rng, rng.randint(4, 30))})
        if i in (2, 7):
            turns += [
                {"from": "human", "value": "And what happened next?"},
                {"from": "gpt", "value": _reply(rng, rng.randint(4, 12))},
            ]
        rows.append({"id": f"sample-{i}", "conversations": turns})
    out = Path(__file__).with_name("sharegpt_sample.json")
    out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
