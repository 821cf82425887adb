"""The core request methods of 2026-07-28 as routes: discover, tools, resources, prompts,
completion and listen (wire §4-§11).

Each handler is a module-level function of ``Served`` (bound once, when the server is built),
the ``Context`` and the already-admitted params; it returns the bare result (the dispatcher
stamps ``resultType`` and ``serverInfo``) or raises an ``McpError``. Routing, validation and
error responses are the dispatcher's.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from functools import partial
from typing import Any, final

import trio

from .._protocol.headers import check_params
from ..errors import InvalidParams, ResourceNotFound
from .context import Context
from .extension_hooks import CallNext, Extension
from .listen import listen
from .registry import Tool, call_tool
from .routes import Route
from .settings import Served
from .tracing import Tracing


def page(items: list[Any], cursor: object, size: int | None) -> tuple[list[Any], str | None]:
    """Cut one page from a sorted list; the cursor is an opaque encoding of the offset."""
    start = 0
    if cursor is not None and cursor != "":
        try:
            start = int(base64.urlsafe_b64decode(str(cursor).encode()).decode().removeprefix("o:"))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise InvalidParams("Invalid cursor") from None
        if not 0 <= start <= len(items):
            raise InvalidParams("Invalid cursor")
    if size is None:
        return items[start:], None
    end = start + size
    next_cursor = (
        base64.urlsafe_b64encode(f"o:{end}".encode()).decode() if end < len(items) else None
    )
    return items[start:end], next_cursor


def _listing(served: Served, key: str, entries: list[Any], cursor: object) -> dict[str, Any]:
    """A cacheable list result (wire §9): one page of ``entries`` under ``key``."""
    items, next_cursor = page(entries, cursor, served.settings.listing.page_size)
    result: dict[str, Any] = {key: items}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    result["ttlMs"] = served.settings.listing.ttl_ms
    result["cacheScope"] = served.settings.listing.cache_scope
    return result


async def discover(served: Served, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    result: dict[str, Any] = {
        "supportedVersions": list(served.settings.supported_versions),
        "capabilities": served.capabilities(),
    }
    if served.settings.instructions is not None:
        result["instructions"] = served.settings.instructions
    result["ttlMs"] = served.settings.listing.ttl_ms
    result["cacheScope"] = served.settings.listing.cache_scope
    return result


async def list_tools(served: Served, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    return _listing(served, "tools", served.registry.listing("tools"), params.get("cursor"))


async def _traced_call(
    tracing: Tracing, ctx: Context, tool: Tool, arguments: Mapping[str, Any]
) -> dict[str, Any]:
    """``call_tool`` in a span of its own: the tool's run, wherever it happens (in a task too)."""
    with tracing.tool(tool.name) as span:
        result = await call_tool(ctx, tool, arguments)
        span.answered(result)
        return result


def _through(extension: Extension, call_next: CallNext) -> CallNext:
    """``call_next`` wrapped in ``extension``'s ``call_tool`` hook."""

    async def call(ctx: Context, tool: Tool, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return await extension.call_tool(ctx, tool, arguments, call_next)

    return call


@final
class ToolCalls:
    """``tools/call`` of one server: the tool found, its scopes and ``Mcp-Param-*`` headers
    checked, then called through every extension's ``call_tool`` hook (the first added is
    the outermost), in a span of its own when the server traces.

    The chain of hooks is built once, on the first call, and again only after an extension
    is added (extensions are added before a server runs, and never taken away).
    """

    __slots__ = ("_chain", "_links", "_served")

    def __init__(self, served: Served) -> None:
        self._served = served
        self._chain: CallNext = call_tool  # the innermost link: the tool itself
        self._links = -1  # the number of extensions ``_chain`` was built with

    def chain(self) -> CallNext:
        """What a call goes through, from the outermost extension's hook to the tool."""
        extensions = self._served.extensions
        if self._links != len(extensions):
            tracing = self._served.settings.tracing
            chain: CallNext = call_tool if tracing is None else partial(_traced_call, tracing)
            for extension in reversed(extensions):
                chain = _through(extension, chain)
            self._chain, self._links = chain, len(extensions)
        return self._chain

    async def __call__(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        name = params["name"]
        tool = self._served.registry.tools.get(name)
        if tool is None:
            raise InvalidParams(f"Unknown tool: {name}")
        if tool.scopes:  # before anything else about the call is looked at (or a task made)
            ctx.require_scopes(*tool.scopes)
        arguments: dict[str, Any] = params.get("arguments")  # type: ignore[assignment]
        if not arguments and type(arguments) is not dict:  # absent (an empty one is kept:
            arguments = {}  # a task holds what its call was given for its whole life)
        if ctx.headers is not None and tool.header_params:
            check_params(ctx.headers, tool.header_params, arguments)
        return await self.chain()(ctx, tool, arguments)


async def list_resources(served: Served, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    entries = served.registry.listing("resources")
    return _listing(served, "resources", entries, params.get("cursor"))


async def list_templates(served: Served, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    entries = served.registry.listing("templates")
    return _listing(served, "resourceTemplates", entries, params.get("cursor"))


async def read_resource(served: Served, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    uri = params["uri"]
    found = served.registry.find_resource(uri)
    if found is None:
        raise ResourceNotFound(uri)  # SEP-2164: -32602 (-32002 on an older-era session)
    resource, variables = found
    return await resource.read(ctx, uri, variables)


async def list_prompts(served: Served, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    entries = served.registry.listing("prompts")
    return _listing(served, "prompts", entries, params.get("cursor"))


async def get_prompt(served: Served, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    name = params["name"]
    prompt = served.registry.prompts.get(name)
    if prompt is None:
        raise InvalidParams(f"Unknown prompt: {name}")
    return await prompt.get(ctx, params.get("arguments") or {})


async def complete(served: Served, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    registry, ref = served.registry, params["ref"]
    if ref["type"] == "ref/prompt":
        key = ("ref/prompt", ref["name"])
        if ref["name"] not in registry.prompts:
            raise InvalidParams(f"Unknown prompt: {ref['name']}")
    else:
        key = ("ref/resource", ref["uri"])
        if ref["uri"] not in registry.templates and ref["uri"] not in registry.resources:
            raise InvalidParams(f"Unknown resource: {ref['uri']}")
    completer = registry.completers.get(key)
    if completer is None:
        await trio.lowlevel.checkpoint()
        return {"completion": {"values": [], "total": 0, "hasMore": False}}
    context = (params.get("context") or {}).get("arguments") or {}
    argument = params["argument"]
    return {
        "completion": await completer.complete(ctx, argument["name"], argument["value"], context)
    }


def core_routes(served: Served) -> list[Route]:
    """The method table of the core protocol for one server."""
    registry = served.registry
    has_tools = lambda: bool(registry.tools)  # noqa: E731
    has_resources = lambda: registry.serves_resources  # noqa: E731
    has_prompts = lambda: bool(registry.prompts)  # noqa: E731
    return [
        Route("server/discover", partial(discover, served), "DiscoverRequest", "DiscoverResult"),
        Route(
            "tools/list",
            partial(list_tools, served),
            "ListToolsRequest",
            "ListToolsResult",
            available=has_tools,
        ),
        Route(
            "tools/call",
            ToolCalls(served),
            "CallToolRequest",
            "CallToolResult",
            name_param="name",
            input_required=True,
            available=has_tools,
        ),
        Route(
            "resources/list",
            partial(list_resources, served),
            "ListResourcesRequest",
            "ListResourcesResult",
            available=has_resources,
        ),
        Route(
            "resources/templates/list",
            partial(list_templates, served),
            "ListResourceTemplatesRequest",
            "ListResourceTemplatesResult",
            available=has_resources,
        ),
        Route(
            "resources/read",
            partial(read_resource, served),
            "ReadResourceRequest",
            "ReadResourceResult",
            name_param="uri",
            input_required=True,
            available=has_resources,
        ),
        Route(
            "prompts/list",
            partial(list_prompts, served),
            "ListPromptsRequest",
            "ListPromptsResult",
            available=has_prompts,
        ),
        Route(
            "prompts/get",
            partial(get_prompt, served),
            "GetPromptRequest",
            "GetPromptResult",
            name_param="name",
            input_required=True,
            available=has_prompts,
        ),
        Route(
            "completion/complete",
            partial(complete, served),
            "CompleteRequest",
            "CompleteResult",
            available=lambda: bool(registry.completers),
        ),
        Route(
            "subscriptions/listen",
            partial(listen, served),
            "SubscriptionsListenRequest",
            "SubscriptionsListenResult",
            available=served.can_notify,
        ),
    ]
