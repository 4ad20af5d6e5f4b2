"""A cap on request bodies, counted as the bytes arrive (pure ASGI middleware).

A Content-Length header is only a claim: a chunked body has none, and a client may send one
header and a different body. So the cap is applied twice: a declared length over the cap is
refused before anything is read, and the bytes actually received are counted as each ASGI
`http.request` message arrives; the message that crosses the cap raises `BodyTooLarge`
instead of being handed on, so the app never holds more than the cap plus one message
(uvicorn hands a body on in pieces of at most its 64 KiB flow-control mark). After the 413 the
server discards the rest of that body (h11 drops data for a request already answered), it does
not buffer it.

`BodyTooLarge` is an HTTPException: FastAPI re-raises those from its body reading (any other
exception there becomes a generic 400), so the app's HTTPException handler answers it; the
middleware answers it itself when it is raised outside a route.
Pattern: starlette.middleware.body_limit (Starlette 0.47+), written here so that any
FastAPI/Starlette this project allows has it.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(HTTPException):
    """A request body over the cap (HTTP 413 Content Too Large, RFC 9110 section 15.5.14)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(status_code=413, detail=f"request body over {max_bytes:,} bytes")


def declared_length(scope: Scope) -> int | None:
    """The Content-Length the client declared; None when absent (a chunked body)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            # h11 refuses a non-numeric Content-Length before the app sees it; be safe anyway
            return int(text) if text.isdigit() else None
    return None


class BodyLimit:
    """Let at most `max_bytes` of request body reach `app`; 413 for anything larger."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = declared_length(scope)
        if length is not None and length > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        received_bytes = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received_bytes
            message = await receive()
            if message["type"] == "http.request":
                received_bytes += len(message.get("body", b""))
                if received_bytes > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, watched_send)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = BodyTooLarge(self.max_bytes).detail
        await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)
