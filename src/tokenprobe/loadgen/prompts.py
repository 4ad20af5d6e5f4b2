"""What to send: synthetic prompts of an exact token count (datasets: `tokenprobe.workload`).

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

Shared prefixes: a prefix group's text (`prefix_text`: "{group}>" and seeded words, fitted to
the group's prefix tokens the same way) goes before the prompt's "{index}:" head; the prompt is
then fitted to the request's whole length, so requests of a group share exactly that text.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tokenprobe.errors import ConfigError, ServerError

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
    """One prompt: its text after any shared `prefix`, its token count when the server counted
    it (prefix included), and a dataset's chat messages (sent as they are on the chat endpoint;
    the prefix then opens the first one)."""

    prompt: str
    input_tokens: int | None = None
    prefix: str = ""
    messages: tuple[tuple[str, str], ...] = ()

    @property
    def text(self) -> str:
        return self.prefix + self.prompt


def _words(index: int, count: int, seed: int, salt: str = "") -> list[str]:
    # str seeds hash with SHA-512: the same everywhere
    rng = random.Random(f"{seed}:{salt}:{index}" if salt else f"{seed}:{index}")
    return rng.choices(WORDS, k=max(count, 0))


def synthetic_text(index: int, n_words: int, seed: int, salt: str = "") -> str:
    """Prompt `index` with `n_words` seeded words after its "{index}:" prefix."""
    return f"{index}:" + "".join(" " + w for w in _words(index, n_words, seed, salt))


async def fit_words(
    make: Callable[[int], str], target: int, tokenize: Tokenizer, guess: int
) -> tuple[str, int] | None:
    """The text `make(n_words)` the server counts as exactly `target` tokens, and that count:
    starts at `guess` words and corrects by the server's miscount, up to FIT_ROUNDS times (1-2
    rounds: each word is about one token); None when no word count gives it. Raises
    _NoTokenizerError when the server cannot count."""
    n_words = max(guess, 0)
    tried: set[int] = set()
    for _ in range(FIT_ROUNDS):
        text = make(n_words)
        counted = await tokenize(text)
        if counted is None:
            raise _NoTokenizerError
        if counted == target:
            return text, counted
        tried.add(n_words)
        n_words = max(n_words + target - counted, 0)
        if n_words in tried:
            break
    return None


async def fit_prompt(
    index: int,
    input_tokens: int,
    seed: int,
    tokenize: Tokenizer,
    guess: int | None = None,
    salt: str = "",
    prefix: str = "",
) -> PromptItem:
    """A synthetic prompt (after `prefix`) the server counts as exactly `input_tokens` tokens.

    Raises ConfigError when no word count gives the exact length (input_tokens below the
    prefix and the "{index}:" head)."""
    start = max(input_tokens - 2 - len(prefix.split()), 0) if guess is None else guess
    fitted = await fit_words(
        lambda n: prefix + synthetic_text(index, n, seed, salt), input_tokens, tokenize, start
    )
    if fitted is None:
        raise ConfigError(
            "input_tokens",
            input_tokens,
            f"the server's tokenizer gives no synthetic prompt of exactly that length "
            f"(prompt {index} has a {len(str(index)) + 1}-character head"
            f"{' after its shared prefix' if prefix else ''}); try a larger value",
        )
    text, counted = fitted
    return PromptItem(prompt=text[len(prefix) :], input_tokens=counted, prefix=prefix)


async def prefix_text(
    group: int, prefix_tokens: int, seed: int, salt: str, tokenize: Tokenizer | None
) -> str:
    """Prefix group `group`'s text: "{group}>" and seeded words, `prefix_tokens` tokens as the
    server counts them (special tokens included), ending in a newline; one word per token is
    assumed when the server cannot count (`tokenize` None or no /tokenize)."""

    def make(n: int) -> str:
        rng = random.Random(f"{seed}:{salt}:prefix{group}")
        return f"{group}>" + "".join(" " + w for w in rng.choices(WORDS, k=n)) + "\n"

    guess = max(prefix_tokens - 3, 0)
    if tokenize is not None:
        try:
            fitted = await fit_words(make, prefix_tokens, tokenize, guess)
        except _NoTokenizerError:
            fitted = None
        if fitted is not None:
            return fitted[0]
    return make(guess)


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
    shapes = [(i, input_tokens, "") for i in range(first_index, first_index + count)]
    return await fit_prompts(shapes, seed, tokenize, salt)


PromptShape = tuple[int, int, str]  # (index, input_tokens, shared prefix text)


async def fit_prompts(
    shapes: list[PromptShape], seed: int, tokenize: Tokenizer, salt: str = ""
) -> tuple[list[PromptItem], bool]:
    """A prompt per shape; the bool says whether the server verified them (without a tokenizer
    one token per word is assumed and no prompt has an input_tokens)."""
    index, target, prefix = shapes[0]
    try:
        first = await fit_prompt(index, target, seed, tokenize, salt=salt, prefix=prefix)
    except _NoTokenizerError:
        return [_unfitted(shape, seed, salt) for shape in shapes], False
    gate = asyncio.Semaphore(TOKENIZE_PARALLEL)
    # prompts whose index has as many digits need about as many words (less the prefix's and
    # plus the length's difference): one tokenize call each
    seen = {len(str(index)): (_word_count(first.prompt), target - len(prefix.split()))}

    async def fit(shape: PromptShape) -> PromptItem:
        i, n_tokens, head = shape
        words, tokens = seen.get(len(str(i)), (None, 0))
        guess = None if words is None else max(words + n_tokens - len(head.split()) - tokens, 0)
        async with gate:
            try:
                item = await fit_prompt(i, n_tokens, seed, tokenize, guess, salt, head)
            except _NoTokenizerError:
                raise ServerError(
                    f"the server's /tokenize stopped answering (prompt {i})"
                ) from None
        seen.setdefault(len(str(i)), (_word_count(item.prompt), n_tokens - len(head.split())))
        return item

    rest = await asyncio.gather(*(fit(shape) for shape in shapes[1:]))
    return [first, *rest], True


def _unfitted(shape: PromptShape, seed: int, salt: str) -> PromptItem:
    index, n_tokens, prefix = shape
    n_words = max(n_tokens - 2 - len(prefix.split()), 0)
    return PromptItem(synthetic_text(index, n_words, seed, salt), prefix=prefix)


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
