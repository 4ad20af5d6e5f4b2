"""The served model's id from the server: GET {url}/models (OpenAI `GET /v1/models`).

OpenAI's list-models answer is `{"object": "list", "data": [{"id": "...", ...}, ...]}`
(https://platform.openai.com/docs/api-reference/models/list); vLLM, SGLang, llama.cpp, TGI and
Ollama's OpenAI layer answer the same shape. `bench` without `--model` sends the first id, as
`vllm bench serve` does without `--model`.
"""

from __future__ import annotations

import json

import aiohttp

from tokenprobe.errors import ServerError
from tokenprobe.loadgen.credentials import credentials, with_path

MODELS_TIMEOUT_S = 30.0
MAX_MODELS_BYTES = 4 * 1024 * 1024  # a list of names; a larger answer is not one


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
