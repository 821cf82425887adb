"""The server published clients are tested against (tests/clients): the sessions app's
tools (``sessions_app.build``), ``steps``, which reports progress three times, and ``era``,
which tells how the call was served.

Served by hypercorn (``app``) and on stdio (``presa-trio serve clients_app:server --stdio``
with tests/support on PYTHONPATH). Its tools are added here rather than in sessions_app, whose
tool list other tests name exactly."""

from __future__ import annotations

from sessions_app import build

from presa_trio import Context, Server, Sessions
from presa_trio.mrtr import list_roots


def build_clients_server() -> Server:
    server = build(sessions=Sessions(push_timeout=60.0))

    @server.tool()
    async def steps(ctx: Context, confirm: bool = False) -> str:
        """Reports progress at each of three steps, then says so; with ``confirm``, asks the
        client for its roots before it answers."""
        for step in (1, 2, 3):
            await ctx.progress(step, total=3, message=f"step {step} of 3")
        if not confirm:
            return "3 steps done"
        answer = (await ctx.input({"roots": list_roots()}))["roots"]
        return f"3 steps done, {len(answer.get('roots', []))} roots"

    @server.tool()
    def era(ctx: Context) -> str:
        """The protocol version this call was served at, whether on a session, and the
        client's name."""
        info = ctx.meta.client_info or {}
        on = "a session" if ctx.session is not None else "no session"
        return f"{ctx.meta.protocol_version}, {on}, client {info.get('name')}"

    return server


server = build_clients_server()
app = server.asgi_app()
