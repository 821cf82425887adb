"""The core request methods of 2026-07-28, as ``Method`` entries for the dispatcher.

Each handler reads already-admitted params (schema-valid, ``_meta`` checked) and returns a
result dict; errors are raised as ``McpError``. Routing, validation and error responses are
the dispatcher's; what is served is the server's registry.
"""

from __future__ import annotations

import base64
import binascii
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from ._context import Context
from ._dispatch import Method
from ._registry import Tool
from ._subscriptions import CORE_FLAGS, RESOURCE_SUBSCRIPTIONS
from ._wire import dialect
from ._wire.headers import check_params
from ._wire.jsonrpc import notification_message
from .errors import InvalidParams

if TYPE_CHECKING:
    from ._server import Server

KEEPALIVE_SECONDS = 15.0
MAX_COMPLETIONS = 100


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


def core_methods(server: Server) -> list[Method]:
    def cacheable(result: dict[str, Any], cursor_next: str | None) -> dict[str, Any]:
        if cursor_next is not None:
            result["nextCursor"] = cursor_next
        result["ttlMs"] = server.list_ttl_ms
        result["cacheScope"] = server.cache_scope
        return server.stamp(result)

    async def discover(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = {
            "resultType": dialect.COMPLETE,
            "supportedVersions": list(server.supported_versions),
            "capabilities": server.capabilities(),
        }
        if server.instructions is not None:
            result["instructions"] = server.instructions
        return cacheable(result, None)

    async def list_tools(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        tools = [server.tools[n].wire for n in sorted(server.tools)]
        items, nxt = page(tools, params.get("cursor"), server.page_size)
        return cacheable({"resultType": dialect.COMPLETE, "tools": items}, nxt)

    async def call_tool(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        name = params["name"]
        tool = server.tools.get(name)
        if tool is None:
            raise InvalidParams(f"Unknown tool: {name}")
        arguments: dict[str, Any] = params.get("arguments") or {}
        if ctx.headers is not None and tool.header_params:
            check_params(ctx.headers, tool.header_params, arguments)
        call = _base_call
        for extension in reversed(server.extensions):
            call = _wrap(extension, call)
        return server.stamp(await call(ctx, tool, arguments))

    async def list_resources(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        entries = [server.resources[u].describe() for u in server.resources]
        items, nxt = page(entries, params.get("cursor"), server.page_size)
        return cacheable({"resultType": dialect.COMPLETE, "resources": items}, nxt)

    async def list_templates(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        entries = [t.describe() for t in server.templates.values()]
        items, nxt = page(entries, params.get("cursor"), server.page_size)
        return cacheable({"resultType": dialect.COMPLETE, "resourceTemplates": items}, nxt)

    async def read_resource(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        uri = params["uri"]
        resource = server.resources.get(uri)
        if resource is not None:
            return server.stamp(await resource.read(ctx, uri, {}))
        for template in server.templates.values():
            variables = template.match(uri)
            if variables is not None:
                return server.stamp(await template.read(ctx, uri, variables))
        raise InvalidParams("Resource not found", {"uri": uri})  # SEP-2164, never -32002

    async def list_prompts(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        entries = [server.prompts[n].describe() for n in server.prompts]
        items, nxt = page(entries, params.get("cursor"), server.page_size)
        return cacheable({"resultType": dialect.COMPLETE, "prompts": items}, nxt)

    async def get_prompt(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        name = params["name"]
        prompt = server.prompts.get(name)
        if prompt is None:
            raise InvalidParams(f"Unknown prompt: {name}")
        return server.stamp(await prompt.get(ctx, params.get("arguments") or {}))

    async def complete(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        ref = params["ref"]
        if ref["type"] == "ref/prompt":
            key = ("ref/prompt", ref["name"])
            if ref["name"] not in server.prompts:
                raise InvalidParams(f"Unknown prompt: {ref['name']}")
        else:
            key = ("ref/resource", ref["uri"])
            if ref["uri"] not in server.templates and ref["uri"] not in server.resources:
                raise InvalidParams(f"Unknown resource: {ref['uri']}")
        completer = server.completers.get(key)
        values: list[str] = []
        if completer is not None:
            context = (params.get("context") or {}).get("arguments") or {}
            found = completer(params["argument"]["name"], params["argument"]["value"], context)
            if inspect.isawaitable(found):
                found = await found
            values = [str(v) for v in found]
        completion: dict[str, Any] = {
            "values": values[:MAX_COMPLETIONS],
            "total": len(values),
            "hasMore": len(values) > MAX_COMPLETIONS,
        }
        return server.stamp({"resultType": dialect.COMPLETE, "completion": completion})

    async def listen(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        return await _listen(server, ctx, params["notifications"])

    has_tools = lambda: bool(server.tools)  # noqa: E731
    has_resources = lambda: bool(server.resources or server.templates)  # noqa: E731
    has_prompts = lambda: bool(server.prompts)  # noqa: E731
    return [
        Method("server/discover", discover, "DiscoverRequest", "DiscoverResult"),
        Method(
            "tools/list", list_tools, "ListToolsRequest", "ListToolsResult", available=has_tools
        ),
        Method(
            "tools/call",
            call_tool,
            "CallToolRequest",
            "CallToolResult",
            name_param="name",
            input_required=True,
            available=has_tools,
        ),
        Method(
            "resources/list",
            list_resources,
            "ListResourcesRequest",
            "ListResourcesResult",
            available=has_resources,
        ),
        Method(
            "resources/templates/list",
            list_templates,
            "ListResourceTemplatesRequest",
            "ListResourceTemplatesResult",
            available=has_resources,
        ),
        Method(
            "resources/read",
            read_resource,
            "ReadResourceRequest",
            "ReadResourceResult",
            name_param="uri",
            input_required=True,
            available=has_resources,
        ),
        Method(
            "prompts/list",
            list_prompts,
            "ListPromptsRequest",
            "ListPromptsResult",
            available=has_prompts,
        ),
        Method(
            "prompts/get",
            get_prompt,
            "GetPromptRequest",
            "GetPromptResult",
            name_param="name",
            input_required=True,
            available=has_prompts,
        ),
        Method(
            "completion/complete",
            complete,
            "CompleteRequest",
            "CompleteResult",
            available=lambda: bool(server.completers),
        ),
        Method(
            "subscriptions/listen",
            listen,
            "SubscriptionsListenRequest",
            "SubscriptionsListenResult",
            available=lambda: _can_notify(server),
        ),
    ]


async def _base_call(ctx: Context, tool: Tool, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return await tool.call(ctx, arguments)


def _wrap(extension: Any, call_next: Any) -> Any:
    async def call(ctx: Context, tool: Tool, arguments: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await extension.call_tool(ctx, tool, arguments, call_next)
        return result

    return call


def _can_notify(server: Server) -> bool:
    return bool(server.tools or server.prompts or server.resources or server.templates) or any(
        e.filter_keys() for e in server.extensions
    )


async def agreed_filter(
    server: Server, ctx: Context, requested: Mapping[str, Any]
) -> dict[str, Any]:
    """The part of a listen filter this server honours (wire §11.2)."""
    caps = server.capabilities()
    backing = dict(zip(CORE_FLAGS, ("tools", "prompts", "resources"), strict=True))
    agreed: dict[str, Any] = {}
    for flag in CORE_FLAGS:
        if requested.get(flag) is True and backing[flag] in caps:
            agreed[flag] = True
    uris = requested.get(RESOURCE_SUBSCRIPTIONS)
    if uris and "resources" in caps:
        agreed[RESOURCE_SUBSCRIPTIONS] = list(dict.fromkeys(uris))
    for extension in server.extensions:
        keys = extension.filter_keys()
        if keys & requested.keys():
            agreed.update(await extension.accept_filter(ctx, requested))
    return agreed


async def _listen(server: Server, ctx: Context, requested: Mapping[str, Any]) -> dict[str, Any]:
    """Hold one listen stream: the acknowledgement first, then matching notifications."""
    agreed = await agreed_filter(server, ctx, requested)
    tag = {dialect.META_SUBSCRIPTION_ID: ctx.request_id}
    async with server.bus.listen(ctx.request_id, agreed) as listener:
        ack = {"_meta": tag, "notifications": agreed}
        await ctx.notify(notification_message("notifications/subscriptions/acknowledged", ack))
        while True:
            event = None
            with trio.move_on_after(KEEPALIVE_SECONDS):
                try:
                    event = await listener.receive.receive()
                except trio.EndOfChannel:
                    break
            if event is None:
                if ctx.keepalive is not None:
                    await ctx.keepalive()
                continue
            await ctx.notify(notification_message(event.method, {**event.params, "_meta": tag}))
    return {"resultType": dialect.COMPLETE, "_meta": dict(tag)}
