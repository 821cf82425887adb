"""Record the HTTP traffic of a presa_trio ASGI app as a capture, in the record format of
``presa-trio validate``: a client line per request (its method, headers and body), a server
line per JSON response or per event of an event stream, or one without a message for a
response with no body; ``exchange`` numbers the requests.

``RecordingApp(app)`` stands in for ``app`` wherever an ``AsgiApp`` is used (it passes every
attribute through), so ``presa_trio.testing.Client(RecordingApp(app))`` records all it does.
"""

from __future__ import annotations

import json
from typing import Any

from presa_trio._transports.asgi import AsgiApp


class RecordingApp:
    def __init__(self, app: AsgiApp) -> None:
        self.app = app
        self.lines: list[str] = []
        self._exchanges = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    def _write(self, record: dict[str, Any]) -> None:
        self.lines.append(json.dumps(record))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self._exchanges += 1
        exchange = self._exchanges
        request_headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        body = bytearray()
        recorded_request = False
        response: dict[str, Any] = {}
        buffer = bytearray()
        wrote_server_line = False

        def record_request() -> None:
            nonlocal recorded_request
            if recorded_request:
                return
            recorded_request = True
            line: dict[str, Any] = {
                "direction": "client",
                "exchange": exchange,
                "http": {"method": scope["method"], "headers": request_headers},
            }
            if body:
                line["message"] = json.loads(bytes(body))
            self._write(line)

        async def receiving() -> dict[str, Any]:
            event: dict[str, Any] = await receive()
            if event["type"] == "http.request":
                body.extend(event.get("body", b""))
                if not event.get("more_body", False):
                    record_request()
            return event

        def server_line(message: Any) -> None:
            nonlocal wrote_server_line
            wrote_server_line = True
            line: dict[str, Any] = {"direction": "server", "exchange": exchange, "http": response}
            if message is not None:
                line["message"] = message
            self._write(line)

        async def sending(event: dict[str, Any]) -> None:
            if event["type"] == "http.response.start":
                record_request()  # answered before the body was read (a refusal)
                headers = {k.decode().lower(): v.decode() for k, v in event.get("headers", [])}
                response.update(status=event["status"], headers=headers)
            elif event["type"] == "http.response.body":
                buffer.extend(event.get("body", b""))
                kind = response["headers"].get("content-type", "")
                if kind.startswith("text/event-stream"):
                    while b"\n\n" in buffer:
                        raw, _, rest = bytes(buffer).partition(b"\n\n")
                        buffer[:] = rest
                        data = [
                            part[5:].strip()
                            for part in raw.split(b"\n")
                            if part.startswith(b"data:")
                        ]
                        if data:
                            server_line(json.loads(b"\n".join(data)))
                elif not event.get("more_body", False):
                    server_line(json.loads(bytes(buffer)) if buffer.strip() else None)
            await send(event)

        try:
            await self.app(scope, receiving, sending)
        finally:
            if response and not wrote_server_line:
                server_line(None)
