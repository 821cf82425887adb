"""Generic hooks through which protocol extensions plug into a server (spec basic/versioning).

An extension can add request methods, wrap ``tools/call``, advertise settings under
``capabilities.extensions``, run background work in the server's lifespan nursery, and accept
its own keys in a ``subscriptions/listen`` filter. The core never names any extension.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from .errors import InvalidParams

if TYPE_CHECKING:
    from ._context import Context
    from ._dispatch import Method
    from ._registry import Tool
    from ._server import Server

CallTool = Callable[["Context", "Tool", Mapping[str, Any]], Awaitable[dict[str, Any]]]


class Extension:
    """Subclass and override the hooks you need; every default is a no-op."""

    #: The extension identifier advertised in ``capabilities.extensions`` (prefix required).
    id: str = ""

    def settings(self) -> dict[str, Any]:
        """The settings object advertised for this extension in ``server/discover``."""
        return {}

    def negotiate(self, settings: object) -> None:
        """Check the settings a request declared for this extension, on every such request.

        Called during admission, after the core ``_meta`` checks and before method lookup;
        raise an ``McpError`` to refuse the request. The default accepts any settings object.
        """
        if not isinstance(settings, Mapping):
            raise InvalidParams(f"Settings for extension {self.id} must be an object")

    def methods(self, server: Server) -> Iterable[Method]:
        """Request methods this extension routes (validated and gated like core ones)."""
        return ()

    async def call_tool(
        self, ctx: Context, tool: Tool, arguments: Mapping[str, Any], call_next: CallTool
    ) -> dict[str, Any]:
        """Wrap ``tools/call`` after the tool is found and its headers checked."""
        return await call_next(ctx, tool, arguments)

    async def serve(self, server: Server, *, task_status: trio.TaskStatus[None]) -> None:
        """Background work owned by the server's lifespan nursery; cancelled at shutdown."""
        task_status.started()

    def filter_keys(self) -> frozenset[str]:
        """``subscriptions/listen`` filter keys this extension understands."""
        return frozenset()

    async def accept_filter(self, ctx: Context, requested: Mapping[str, Any]) -> dict[str, Any]:
        """From the requested filter, the part of this extension's keys the server honours.

        Raise an ``McpError`` to refuse the whole listen request.
        """
        return {}
