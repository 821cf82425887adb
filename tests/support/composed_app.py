"""Two servers mounted in a third, with lifespans and middleware, for the composition tests:
in process (``build``) and under hypercorn (``app``).

Each lifespan notes when it is entered and left in ``events`` (and, with ``COMPOSED_LOG`` set,
in that file, one line each), and yields a dict its tools read back through ``ctx.lifespan``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from presa_trio import Context, Server
from presa_trio.middleware import RateLimit, RequestLog


def build(events: list[str] | None = None) -> Server:
    noted = events if events is not None else []
    log_path = os.environ.get("COMPOSED_LOG")

    def note(event: str) -> None:
        noted.append(event)
        if log_path:
            with open(log_path, "a") as log:
                log.write(event + "\n")

    def lifespan_of(label: str) -> Any:
        @asynccontextmanager
        async def lifespan(server: Server) -> AsyncIterator[dict[str, str]]:
            await trio.lowlevel.checkpoint()
            note(f"enter {label} ({server.name})")
            try:
                yield {"owner": label}
            finally:
                note(f"exit {label}")

        return lifespan

    weather = Server("weather", lifespan=lifespan_of("weather"))

    @weather.tool()
    async def forecast(ctx: Context, city: str) -> str:
        """Tomorrow's weather."""
        return f"{city}: sunny (lifespan of {ctx.lifespan['owner']})"

    @weather.tool()
    def stations_count(ctx: Context) -> int:
        """A sync tool, in a worker thread: its lifespan all the same."""
        return len(ctx.lifespan["owner"])

    @weather.resource("data://stations", mime_type="application/json")
    def stations() -> str:
        return '["north", "south"]'

    @weather.resource("data://stations/{station}")
    async def station(ctx: Context, station: str) -> str:
        return f"station {station} (lifespan of {ctx.lifespan['owner']})"

    @weather.prompt()
    def outlook(city: str) -> str:
        """Ask for an outlook."""
        return f"What is the outlook for {city}?"

    @weather.completion(prompt="outlook")
    def cities(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return [c for c in ("Oslo", "Osaka", "Paris") if c.startswith(value)]

    @weather.completion(resource="data://stations/{station}")
    def station_names(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return [s for s in ("north", "south") if s.startswith(value)]

    notes = Server("notes", lifespan=lifespan_of("notes"))

    @notes.tool()
    async def forecast_note(ctx: Context) -> str:  # weather_forecast and notes_forecast_note
        return f"a note (lifespan of {ctx.lifespan['owner']})"

    @notes.resource("notes://{+path}")
    def note_at(path: str) -> str:
        return f"note at {path}"

    main = Server("main", lifespan=lifespan_of("main"))

    @main.tool()
    async def whoami(ctx: Context) -> str:
        return f"main (lifespan of {ctx.lifespan['owner']})"

    main.mount(weather, prefix="weather")
    main.mount(notes, prefix="notes")
    return main


def serve() -> Any:
    server = build()
    server.add_middleware(RequestLog())
    # five calls at once, then one every two seconds: a margin for a slow machine
    server.add_middleware(RateLimit(per_second=0.5, burst=5, methods={"tools/call"}))
    return server.asgi_app()


app = serve()
