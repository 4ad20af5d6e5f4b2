"""What to send: synthetic prompts of an exact token count, or a JSONL dataset.

Synthetic prompt i is `"{i}:"` followed by common English words drawn with a generator seeded by
(seed, salt, i): the leading index makes the prompts of one run differ from their first tokens,
and the salt (drawn per run and sweep point by the runner unless prefix reuse is allowed) makes
every run and sweep point draw other words, so a server's prefix cache cannot shorten prefill:
at most the BOS token and the index's digits are shared. With salt "" the words depend on the
seed alone (a replay of an earlier run's prompts).

When the server has a `/tokenize` endpoint (llama.cpp, vLLM) each prompt is tokenized and its word
count corrected until the server counts exactly `input_tokens` (with its special tokens, as
`usage.prompt_tokens` counts them for /v1/completions; chat adds its template's tokens on top).
Without one, one token per word is assumed and the run's config says `input_tokens_verified:
false`.

Dataset: JSONL, one object a line: {"prompt": str, "output_tokens": int (optional)}.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from tokenprobe.errors import ConfigError, SchemaError, ServerError

DATASET_KEYS: tuple[str, ...] = ("prompt", "output_tokens")
FIT_ROUNDS = 6
TOKENIZE_PARALLEL = 8

# Short, frequent words: one token each in the BPE vocabularies of common LLMs.
_WORD_LIST = """
the of and to in is was for on are with as at be
by this from have or one had not but what all were when we
there can an your which their said if do will each about how up
out them then she many some so these would other into has more her
two like him see time could no make than first been its who now
people my made over did down only way find use may water long little
very after words called just where most know get through back much go good
new write our used me man too any day same right look think also
around another came come work three word must because does part even place well
such here take why help put different away again off went old number great
tell men say small every found still between name should home big give air
line set own under read last never us left end along while might next
sound below saw something thought both few those always looked show large often together
asked house world going want school important until form food keep children feet land
side without boy once animals life enough took sometimes four head above kind began
almost live page got earth need far hand high year mother light parts country
father let night following picture being study second eyes soon times story boys since
white days ever paper hard near sentence better best across during today others sure
means knew
"""
WORDS: tuple[str, ...] = tuple(_WORD_LIST.split())

Tokenizer = Callable[[str], Awaitable[int | None]]


@dataclass(frozen=True, slots=True)
class PromptItem:
    """One prompt and, when known, how many tokens to ask for and how many it has."""

    prompt: str
    output_tokens: int | None = None
    input_tokens: int | None = None


def _words(index: int, count: int, seed: int, salt: str = "") -> list[str]:
    # str seeds hash with SHA-512: the same everywhere
    rng = random.Random(f"{seed}:{salt}:{index}" if salt else f"{seed}:{index}")
    return rng.choices(WORDS, k=max(count, 0))


def synthetic_text(index: int, n_words: int, seed: int, salt: str = "") -> str:
    """Prompt `index` with `n_words` seeded words after its "{index}:" prefix."""
    return f"{index}:" + "".join(" " + w for w in _words(index, n_words, seed, salt))


async def fit_prompt(
    index: int,
    input_tokens: int,
    seed: int,
    tokenize: Tokenizer,
    guess: int | None = None,
    salt: str = "",
) -> PromptItem:
    """A synthetic prompt the server counts as exactly `input_tokens` tokens.

    Starts from `guess` words (default: one token per word) and corrects the word count by the
    server's miscount, up to FIT_ROUNDS times (1-2 rounds: each word is about one token).
    Raises ConfigError when no word count gives the exact length (input_tokens below the prefix).
    """
    n_words = max(input_tokens - 2, 0) if guess is None else guess
    tried: set[int] = set()
    for _ in range(FIT_ROUNDS):
        text = synthetic_text(index, n_words, seed, salt)
        counted = await tokenize(text)
        if counted is None:
            raise _NoTokenizerError
        if counted == input_tokens:
            return PromptItem(prompt=text, input_tokens=counted)
        tried.add(n_words)
        n_words = max(n_words + input_tokens - counted, 0)
        if n_words in tried:
            break
    raise ConfigError(
        "input_tokens",
        input_tokens,
        f"the server's tokenizer gives no synthetic prompt of exactly that length "
        f"(prompt {index} has a {len(str(index)) + 1}-character prefix); try a larger value",
    )


class _NoTokenizerError(Exception):
    """The server has no usable /tokenize endpoint."""


async def synthetic_prompts(
    count: int,
    input_tokens: int,
    seed: int,
    tokenize: Tokenizer,
    first_index: int = 0,
    salt: str = "",
) -> tuple[list[PromptItem], bool]:
    """`count` prompts of `input_tokens` tokens; the bool says whether the server verified them."""
    indices = range(first_index, first_index + count)
    try:
        first = await fit_prompt(indices[0], input_tokens, seed, tokenize, salt=salt)
    except _NoTokenizerError:
        guess = [
            PromptItem(synthetic_text(i, max(input_tokens - 2, 0), seed, salt), input_tokens=None)
            for i in indices
        ]
        return guess, False
    gate = asyncio.Semaphore(TOKENIZE_PARALLEL)
    # prompts whose index has as many digits need about as many words: one tokenize call each
    words_by_digits = {len(str(indices[0])): _word_count(first.prompt)}

    async def fit(i: int) -> PromptItem:
        async with gate:
            try:
                guess = words_by_digits.get(len(str(i)))
                item = await fit_prompt(i, input_tokens, seed, tokenize, guess, salt)
                words_by_digits.setdefault(len(str(i)), _word_count(item.prompt))
                return item
            except _NoTokenizerError:
                raise ServerError(
                    f"the server's /tokenize stopped answering (prompt {i})"
                ) from None

    rest = await asyncio.gather(*(fit(i) for i in indices[1:]))
    return [first, *rest], True


def reshuffled(prompt: str, salt: str) -> str:
    """A synthetic prompt with its words (after the "{index}:" head) in another seeded order.

    As many tokens as `prompt` on tokenizers that split words at spaces before BPE (GPT-2,
    Llama 3, Qwen, SmolLM; SentencePiece's split_by_whitespace default): each " word" is
    tokenized on its own, so the order does not change the count; the server's usage counts the
    record's input tokens in any case. A prefix cache then matches at most the head and, by
    chance, a word or two."""
    head, *words = prompt.split(" ")
    random.Random(f"{salt}:{prompt}").shuffle(words)
    return " ".join([head, *words])


def _word_count(prompt: str) -> int:
    return len(prompt.split()) - 1  # minus the "{index}:" prefix


def load_dataset(path: str | Path) -> list[PromptItem]:
    """Read a JSONL dataset; one clear SchemaError/ConfigError for any bad line or an empty file."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("dataset", str(path), f"cannot be read: {exc}") from None
    items = [
        _dataset_item(line, f"{path}:{number}")
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]
    if not items:
        raise ConfigError("dataset", str(path), "has no requests (the file is empty)")
    return items


def _dataset_item(line: str, where: str) -> PromptItem:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise SchemaError(where, f"not valid JSON ({exc.msg}); expected {_SHAPE}") from None
    if not isinstance(obj, dict):
        raise SchemaError(where, f"expected a JSON object {_SHAPE}")
    unknown = sorted(set(obj) - set(DATASET_KEYS))
    if unknown:
        raise SchemaError(where, f"unknown keys {unknown}; allowed: {list(DATASET_KEYS)}")
    prompt = obj.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise SchemaError(where, "'prompt' must be a non-empty string")
    out = obj.get("output_tokens")
    if out is not None and (isinstance(out, bool) or not isinstance(out, int) or out < 1):
        raise SchemaError(where, f"'output_tokens'={out!r} must be an integer >= 1")
    return PromptItem(prompt=prompt, output_tokens=out)


_SHAPE = '{"prompt": "...", "output_tokens": 128}'
