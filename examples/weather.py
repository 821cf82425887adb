"""The README's quickstart server: a forecast tool and a stations resource."""

from __future__ import annotations

from presa_trio import Context, Server

server = Server("weather", version="1.0.0")


@server.tool()
async def forecast(ctx: Context, city: str, days: int = 3) -> str:
    """Forecast for a city."""
    for day in range(days):
        await ctx.progress(day + 1, days)  # streamed as SSE when the client asked for progress
    return f"{city}: sunny for {days} days"


@server.resource("weather://stations", mime_type="application/json")
def stations() -> str:
    return '["north", "south"]'


app = server.asgi_app()
