"""The served model's id from the server: GET {url}/models (OpenAI `GET /v1/models`).

OpenAI's list-models answer is `{"object": "list", "data": [{"id": "...", ...}, ...]}`
(https://platform.openai.com/docs/api-reference/models/list); vLLM, SGLang, llama.cpp, TGI and
Ollama's OpenAI layer answer the same shape. `bench` without `--model` sends the first id, as
`vllm bench serve` does without `--model`. `server_identity` reads who serves (the models'
`owned_by`) and its version (GET /version) for the run's config.
"""

from __future__ import annotations

import json

import aiohttp
from yarl import URL

from tokenprobe.errors import ServerError
from tokenprobe.loadgen.credentials import api_root, credentials, with_path
from tokenprobe.units import MiB

MODELS_TIMEOUT_S = 30.0
MAX_MODELS_BYTES = 4 * MiB  # a list of names; a larger answer is not one


async def served_models(base_url: str, api_key: str | None) -> list[str]:
    """Model ids the server lists, in its order; ServerError saying why when it lists none or
    the endpoint fails (the URL is shown with its credentials masked)."""
    creds = credentials(base_url, api_key)
    shown = creds.shown_url.partition("?")[0].rstrip("/") + "/models"
    headers = {"Authorization": creds.authorization} if creds.authorization else {}
    timeout = aiohttp.ClientTimeout(total=MODELS_TIMEOUT_S)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(with_path(creds.request_url, "/models"), headers=headers) as resp,
        ):
            body = await resp.content.read(MAX_MODELS_BYTES)
            status = resp.status
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise ServerError(_why(shown, f"failed ({type(exc).__name__}: {exc})")) from None
    if status != 200:
        raise ServerError(_why(shown, f"answered HTTP {status}"))
    ids = _ids(body)
    if ids is None:
        raise ServerError(_why(shown, "did not answer an OpenAI model list"))
    if not ids:
        raise ServerError(_why(shown, "lists no model"))
    return ids


def _why(shown: str, what: str) -> str:
    return f"--model not given and GET {shown} {what}; pass --model NAME"


def _ids(body: bytes) -> list[str] | None:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        return None
    return [
        m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"]
    ]


IDENTITY_TIMEOUT_S = 5.0
MAX_IDENTITY_BYTES = 64 * 1024


async def server_identity(base_url: str, api_key: str | None) -> tuple[str | None, str | None]:
    """(who serves, its version) as the server says, for the run's config: the `owned_by` of
    the first model of GET {url}/models (vLLM "vllm", SGLang "sglang", llama.cpp "llamacpp")
    and the "version" of GET {root}/version (vLLM, SGLang); None for what it does not say.
    Never raises: a server that answers neither is measured all the same."""
    creds = credentials(base_url, api_key)
    headers = {"Authorization": creds.authorization} if creds.authorization else {}
    timeout = aiohttp.ClientTimeout(total=IDENTITY_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        models = await _get_json(session, with_path(creds.request_url, "/models"), headers)
        version = await _get_json(
            session, with_path(api_root(creds.request_url), "/version"), headers
        )
    data = models.get("data") if isinstance(models, dict) else None
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    owner, number = (
        first.get("owned_by"),
        version.get("version") if isinstance(version, dict) else None,
    )
    return (
        owner if isinstance(owner, str) and owner else None,
        number if isinstance(number, str) and number else None,
    )


async def _get_json(session: aiohttp.ClientSession, url: URL, headers: dict[str, str]) -> object:
    """The JSON body of a GET that answers 200, else None (any failure)."""
    try:
        async with session.get(url, headers=headers) as resp:
            if resp.status != 200:
                return None
            body = await resp.content.read(MAX_IDENTITY_BYTES)
        return json.loads(body)
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError, UnicodeDecodeError):
        return None
