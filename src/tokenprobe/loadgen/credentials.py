"""Credentials of a run, kept out of everything written: the URL's userinfo, key-like query
parameters and the API key.

A user may write the key in the URL (`http://user:key@host:8000/v1`, `http://sk-key@host/v1`,
`http://host/v1?api_key=...`) or give it by `--api-key` / `--api-key-env`. Requests use it as a
user expects: `user:password@` becomes HTTP Basic auth (what curl does), a lone `token@` (or
`:token@`) becomes `Authorization: Bearer token` (what OpenAI-compatible servers check), query
parameters are sent as given. What is written or shown (config.json, records, summary, messages)
uses `shown_url`, with no userinfo and `***` for the value of every key-like parameter, and every
secret value is replaced by `***` wherever it appears in text (`records.redact`), including text a
server echoes back (an error body quoting the key).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field

from yarl import URL

from tokenprobe.errors import ConfigError
from tokenprobe.records import REDACTED

# query parameter names that carry a secret (api_key, api-key, key, token, access_token, sig...)
SECRET_PARAM = re.compile(r"key|token|secret|passw|auth|sig|credential|session", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Credentials:
    """`request_url`: what requests go to (no userinfo; query as given); `shown_url`: what is
    written and shown; `authorization`: the Authorization header value, if any; `secrets`: every
    secret value, for redaction (repr hides them)."""

    request_url: URL
    shown_url: str
    authorization: str | None = field(default=None, repr=False)
    secrets: tuple[str, ...] = field(default=(), repr=False)


def mask_url(url: str) -> str:
    """A URL fit to show even when it does not parse: userinfo and key-like values masked."""
    masked = re.sub(r"//[^/?#@]*@", f"//{REDACTED}@", url)
    return re.sub(
        r"([?&][^=&#]*(?:key|token|secret|passw|auth|sig|credential|session)[^=&#]*=)[^&#]*",
        rf"\1{REDACTED}",
        masked,
        flags=re.IGNORECASE,
    )


def parse_url(url: str) -> URL:
    """`url` parsed; ConfigError (with the URL masked) when it is not an http(s) URL."""
    try:
        parsed = URL(url)
        ok = parsed.scheme in ("http", "https") and bool(parsed.raw_host)
        parsed.port  # noqa: B018  # an invalid port raises here
    except (ValueError, TypeError):
        ok = False
    if not ok:
        raise ConfigError(
            "url", mask_url(url), "an http(s) URL of the API, e.g. http://127.0.0.1:8000/v1"
        )
    return parsed


def credentials(url: str, api_key: str | None) -> Credentials:
    """Split `url` into what is sent, what is shown, the Authorization header and the secrets.

    The API key wins over userinfo only when there is none: both at once is refused (one
    Authorization header cannot carry both), with neither value in the message.
    """
    parsed = parse_url(url)
    user, password = parsed.user, parsed.password
    if (user or password) and api_key:
        raise ConfigError(
            "api_key", REDACTED, "give the key once: in the URL or by --api-key/--api-key-env"
        )
    secrets: list[str] = [api_key] if api_key else []
    authorization = f"Bearer {api_key}" if api_key else None
    if user and password:
        basic = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        authorization = f"Basic {basic}"
        secrets += [password, parsed.raw_password or "", basic]
    elif user or password:
        token = password or user or ""
        authorization = f"Bearer {token}"
        secrets += [token, parsed.raw_password or parsed.raw_user or ""]
    clean = parsed.with_user(None).with_password(None)
    hidden = {k: (REDACTED if SECRET_PARAM.search(k) else v) for k, v in clean.query.items()}
    secrets += [v for k, v in clean.query.items() if SECRET_PARAM.search(k) and v]
    shown = clean.with_query(hidden) if clean.query else clean
    return Credentials(
        clean, str(shown), authorization, tuple(dict.fromkeys(filter(None, secrets)))
    )


def with_path(url: URL, path: str) -> URL:
    """`url` with `path` appended to its path, its query kept (…/v1?x=1 -> …/v1/completions?x=1)."""
    return url.with_path(url.path.rstrip("/") + path).with_query(url.query)


def api_root(url: URL) -> URL:
    """The server root of an API URL (its path without a trailing /v1), query kept."""
    path = url.path.rstrip("/")
    return url.with_path(path[: -len("/v1")] if path.endswith("/v1") else path).with_query(
        url.query
    )


def metrics_urls(url: str) -> tuple[str, str]:
    """(to scrape, to show) for the `/metrics` beside the API URL `url` (…/v1 -> …/metrics):
    no userinfo in either; key-like query values kept in the first, masked in the second."""
    creds = credentials(url, None)
    target = with_path(api_root(creds.request_url), "/metrics")
    return str(target), mask_url(str(target))


def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets of any URL (userinfo, key-like query values); () when it does not parse."""
    try:
        return credentials(url, None).secrets if url else ()
    except ConfigError:
        return ()
