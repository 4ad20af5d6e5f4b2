"""How the streaming client reads a failure: the pooled-connection race, error bodies, and the
mapping of client-side exceptions to a record's `error_kind` (`loadgen.client` docstring)."""

from __future__ import annotations

from types import SimpleNamespace

import aiohttp

from tokenprobe.loadgen.sse import StreamState

ERROR_BODY_BYTES = 600


async def on_reuse(_session: object, ctx: SimpleNamespace, _params: object) -> None:
    """aiohttp trace hook: the request went out on a pooled connection."""
    state = ctx.trace_request_ctx
    if isinstance(state, StreamState):
        state.reused_connection = True


def lost_on_pooled_connection(exc: Exception, st: StreamState) -> bool:
    """A pooled connection found closed before any response byte (the idle-close race)."""
    if not st.reused_connection or st.got_response:
        return False
    if isinstance(exc, aiohttp.ClientConnectorError):
        return False
    return isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError)


async def error_text(resp: aiohttp.ClientResponse) -> str:
    """ "HTTP <status>: <first bytes of the body>", whitespace collapsed (an HTML error page
    reads as one line); a body that does not come is said so, not waited for past the timeout."""
    try:
        body = await resp.content.read(ERROR_BODY_BYTES)
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"HTTP {resp.status} (body unreadable: {type(exc).__name__})"
    text = " ".join(body.decode("utf-8", "replace").split())
    return f"HTTP {resp.status}: {text}" if text else f"HTTP {resp.status} (empty body)"


def classify_exception(exc: Exception, timeout_s: float) -> tuple[str, str]:
    """Map a client-side exception to (error_kind, message)."""
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts subclass it
        return "timeout", f"no complete response within timeout_s={timeout_s:g}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connect", f"cannot connect: {exc}"
    if isinstance(
        exc,
        aiohttp.ServerDisconnectedError
        | aiohttp.ClientPayloadError
        | aiohttp.ClientOSError
        | ConnectionError,
    ):
        return "connection_closed", f"connection closed: {type(exc).__name__}: {exc}"
    if isinstance(exc, aiohttp.ClientError):
        return "client_error", f"{type(exc).__name__}: {exc}"
    return "client_error", f"unexpected {type(exc).__name__}: {exc}"
