"""``server.mount(other, prefix=...)``: the mounted server's tools and prompts served as
``{prefix}_{name}``, its resources and templates with the prefix after ``scheme://``, its
completions with them, its lifespan entered inside the parent's (left in reverse) and seen by
its own handlers; one run, one backend. What would clash or be served differently is refused
when mounting, never at request time."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from support.composed_app import build

from presa_trio import Context, Server
from presa_trio.auth import BearerAuth
from presa_trio.ext.tasks import TasksExtension
from presa_trio.middleware import RequestLog
from presa_trio.testing import RpcError, open_client, open_session


async def test_everything_mounted_is_listed_under_its_prefix() -> None:
    async with open_client(build()) as client:
        tools = [t["name"] for t in await client.list_tools()]
        resources = await client.request("resources/list")
        templates = await client.request("resources/templates/list")
        prompts = await client.request("prompts/list")
        discovered = await client.discover()
    assert tools == ["notes_forecast_note", "weather_forecast", "weather_stations_count", "whoami"]
    assert [r["uri"] for r in resources["resources"]] == ["data://weather/stations"]
    assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == [
        "data://weather/stations/{station}",
        "notes://notes/{+path}",
    ]
    assert [(p["name"], p["description"]) for p in prompts["prompts"]] == [
        ("weather_outlook", "Ask for an outlook.")
    ]
    assert set(discovered["capabilities"]) >= {"tools", "resources", "prompts", "completions"}


async def test_calls_reads_and_prompts_reach_the_mounted_handlers_with_their_lifespan() -> None:
    async with open_client(build()) as client:
        called = await client.call_tool("weather_forecast", {"city": "Oslo"})
        counted = await client.call_tool("weather_stations_count")
        noted = await client.call_tool("notes_forecast_note")
        own = await client.call_tool("whoami")
        read = await client.read_resource("data://weather/stations")
        templated = await client.read_resource("data://weather/stations/north")
        deep = await client.read_resource("notes://notes/a/b/c")
        prompt = await client.get_prompt("weather_outlook", {"city": "Paris"})
        with pytest.raises(RpcError) as unmounted:
            await client.read_resource("data://stations")
        with pytest.raises(RpcError) as unprefixed:
            await client.call_tool("forecast", {"city": "Oslo"})
    assert called["content"][0]["text"] == "Oslo: sunny (lifespan of weather)"
    assert counted["structuredContent"] == {"result": len("weather")}
    assert noted["content"][0]["text"] == "a note (lifespan of notes)"
    assert own["content"][0]["text"] == "main (lifespan of main)"
    assert read["contents"] == [
        {"uri": "data://weather/stations", "mimeType": "application/json",
         "text": '["north", "south"]'}
    ]  # fmt: skip
    assert templated["contents"][0]["text"] == "station north (lifespan of weather)"
    assert deep["contents"][0] == {"uri": "notes://notes/a/b/c", "text": "note at a/b/c"}
    assert prompt["messages"][0]["content"]["text"] == "What is the outlook for Paris?"
    assert (unmounted.value.code, unmounted.value.data) == (-32602, {"uri": "data://stations"})
    assert unprefixed.value.code == -32602


async def test_completions_are_routed_to_the_mounted_completers() -> None:
    async with open_client(build()) as client:
        by_prompt = await client.request(
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "weather_outlook"},
             "argument": {"name": "city", "value": "Os"}},
        )  # fmt: skip
        by_template = await client.request(
            "completion/complete",
            {"ref": {"type": "ref/resource", "uri": "data://weather/stations/{station}"},
             "argument": {"name": "station", "value": "s"}},
        )  # fmt: skip
        with pytest.raises(RpcError) as old_name:
            await client.request(
                "completion/complete",
                {"ref": {"type": "ref/prompt", "name": "outlook"},
                 "argument": {"name": "city", "value": "Os"}},
            )  # fmt: skip
    assert by_prompt["completion"] == {"values": ["Oslo", "Osaka"], "total": 2, "hasMore": False}
    assert by_template["completion"]["values"] == ["south"]
    assert old_name.value.code == -32602


async def test_lifespans_are_entered_in_mount_order_inside_the_parents_and_left_in_reverse() -> (
    None
):
    events: list[str] = []
    server = build(events)
    async with open_client(server) as client:
        assert events == ["enter main (main)", "enter weather (weather)", "enter notes (notes)"]
        await client.call_tool("whoami")
    assert events[3:] == ["exit notes", "exit weather", "exit main"]


async def test_a_mounted_lifespan_that_fails_to_start_fails_the_run_and_undoes_the_others() -> None:
    left: list[str] = []

    @asynccontextmanager
    async def parents(server: Server) -> AsyncIterator[None]:
        await trio.lowlevel.checkpoint()
        try:
            yield None
        finally:
            left.append(server.name)

    @asynccontextmanager
    async def broken(server: Server) -> AsyncIterator[None]:
        await trio.lowlevel.checkpoint()
        raise OSError("no database")
        yield None

    parent = Server("parent", lifespan=parents)
    parent.mount(Server("child", lifespan=broken), prefix="child")
    with pytest.raises(OSError, match="no database"):
        async with parent.open_runtime():
            raise AssertionError("not reached")
    assert left == ["parent"]


async def test_mounted_servers_nest_and_keep_their_own_lifespans() -> None:
    @asynccontextmanager
    async def yields(server: Server) -> AsyncIterator[str]:
        await trio.lowlevel.checkpoint()
        yield server.name

    inner = Server("inner", lifespan=yields)

    @inner.tool()
    async def where(ctx: Context) -> str:
        return str(ctx.lifespan)

    middle = Server("middle", lifespan=yields)

    @middle.tool()
    async def here(ctx: Context) -> str:
        return str(ctx.lifespan)

    middle.mount(inner, prefix="in")
    outer = Server("outer")
    outer.mount(middle, prefix="mid")
    async with open_client(outer) as client:
        deepest = await client.call_tool("mid_in_where")
        middle_one = await client.call_tool("mid_here")
    assert deepest["content"][0]["text"] == "inner"
    assert middle_one["content"][0]["text"] == "middle"


async def test_an_older_era_session_sees_the_mounted_tools_too() -> None:
    async with open_session(build()) as session:
        listed = await session.request("tools/list")
        called = await session.call_tool("weather_forecast", {"city": "Rome"})
    assert "weather_forecast" in [t["name"] for t in listed["tools"]]
    assert called["content"][0]["text"] == "Rome: sunny (lifespan of weather)"


async def test_the_parents_middleware_wraps_the_mounted_servers_requests(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = build()
    server.add_middleware(RequestLog())
    async with open_client(server) as client:
        with caplog.at_level(logging.INFO, "presa_trio.middleware.requests"):
            await client.call_tool("weather_forecast", {"city": "Oslo"})
    (line,) = [r.getMessage() for r in caplog.records if r.name == "presa_trio.middleware.requests"]
    assert line.startswith("tools/call weather_forecast: complete, ")


async def test_a_mounted_tool_runs_as_a_task_through_the_parents_extension() -> None:
    parent, child = Server("parent"), Server("child")
    parent.add_extension(TasksExtension())
    child.add_extension(TasksExtension())

    @child.tool(options={"tasks": "required"})
    async def slow(ctx: Context) -> str:
        await trio.sleep(0.01)
        return f"done in {ctx.runtime is not None}"

    parent.mount(child, prefix="c")
    async with open_client(parent) as client:
        task_id = await client.create_task("c_slow")
        task = await client.wait_task(task_id)
    assert (task["status"], task["result"]["content"][0]["text"]) == ("completed", "done in True")


# ---------------------------------------------------------------------- refused when mounting


def declared(name: str, **options: Any) -> Server:
    server = Server(name, **options)

    @server.tool()
    def forecast() -> str:
        return "sunny"

    @server.resource("data://stations")
    def stations() -> str:
        return "[]"

    return server


def test_a_name_that_clashes_after_prefixing_is_refused_and_nothing_is_mounted() -> None:
    parent = Server("parent")

    @parent.tool()
    def weather_forecast() -> str:
        return "mine"

    with pytest.raises(ValueError, match="would declare twice: tool 'weather_forecast'"):
        parent.mount(declared("weather"), prefix="weather")
    assert list(parent.registry.tools) == ["weather_forecast"]
    assert parent.registry.resources == {}


def test_two_servers_under_one_prefix_clash() -> None:
    parent = Server("parent")
    parent.mount(declared("a"), prefix="same")
    with pytest.raises(
        ValueError,
        match=r"mounting server 'b' under 'same' would declare twice: tool 'same_forecast', "
        r"resource 'data://same/stations'",
    ):
        parent.mount(declared("b"), prefix="same")


@pytest.mark.parametrize("prefix", ["", "a b", "a/b", "x" * 65, "ünï"])
def test_a_prefix_that_cannot_go_into_names_and_uris_is_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="must be 1-64 characters of"):
        Server("parent").mount(declared("child"), prefix=prefix)


def test_a_uri_without_scheme_and_authority_cannot_be_prefixed() -> None:
    child = Server("child")

    @child.resource("urn:isbn:0451450523")
    def book() -> str:
        return "a book"

    with pytest.raises(ValueError, match="only a URI of the form scheme://rest takes a prefix"):
        Server("parent").mount(child, prefix="books")


def test_mounting_once_the_app_is_built_or_running_is_refused() -> None:
    parent = Server("parent")
    parent.asgi_app()
    with pytest.raises(RuntimeError, match="mount servers before the app of server 'parent'"):
        parent.mount(declared("late"), prefix="late")


async def test_mounting_while_a_run_is_on_is_refused() -> None:
    parent = Server("parent")
    async with parent.open_runtime():
        with pytest.raises(RuntimeError, match="mount servers before a run of server 'parent'"):
            parent.mount(declared("late"), prefix="late")


def test_a_mounted_server_declares_nothing_more() -> None:
    child = declared("child")
    Server("parent").mount(child, prefix="c")
    with pytest.raises(RuntimeError, match="server 'child' is mounted in 'parent': declare"):

        @child.tool()
        def later() -> str:
            return "too late"


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (
            lambda parent, child: child.add_extension(TasksExtension()),
            "uses extension io.modelcontextprotocol/tasks: add it to 'parent'",
        ),
        (
            lambda parent, child: child.add_middleware(RequestLog()),
            "server 'child' has middleware of its own: add it to 'parent'",
        ),
        (
            lambda parent, child: parent.mount(child, prefix="once"),
            "server 'child' is already mounted in 'parent'",
        ),
    ],
)
def test_what_the_parent_would_serve_differently_is_refused(prepare: Any, message: str) -> None:
    parent, child = Server("parent"), declared("child")
    prepare(parent, child)
    with pytest.raises(ValueError, match=message):
        parent.mount(child, prefix="c")


class NoTokens:
    async def verify(self, token: str) -> None:
        await trio.lowlevel.checkpoint()


def test_a_principal_function_or_auth_of_the_mounted_servers_own_is_refused() -> None:
    def by_name(ctx: Context) -> str:
        return "x"

    auth = BearerAuth(
        NoTokens(), resource="https://mcp.example.com/mcp", authorization_servers=["https://a"]
    )
    with pytest.raises(ValueError, match="names principals with a function 'parent' does not"):
        Server("parent").mount(declared("child", principal=by_name), prefix="c")
    with pytest.raises(ValueError, match="server 'child' has auth that 'parent' does not use"):
        Server("parent").mount(declared("child", auth=auth), prefix="c")
    # the parent's own are no conflict, and a parent may protect what it mounts
    Server("parent", principal=by_name).mount(declared("child", principal=by_name), prefix="c")
    Server("parent", auth=auth).mount(declared("child", auth=auth), prefix="c")
    Server("parent", auth=auth).mount(declared("child"), prefix="c")


def test_a_server_is_not_mounted_in_itself_nor_into_a_mounted_one() -> None:
    parent = Server("parent")
    with pytest.raises(ValueError, match="cannot be mounted in itself"):
        parent.mount(parent, prefix="me")
    child = declared("child")
    parent.mount(child, prefix="c")
    with pytest.raises(RuntimeError, match="server 'child' is mounted in 'parent': mount into"):
        child.mount(declared("grandchild"), prefix="g")
    with pytest.raises(RuntimeError, match="server 'child' is mounted in 'parent': add middle"):
        child.add_middleware(RequestLog())


def test_a_tool_name_past_128_characters_is_refused_when_mounting() -> None:
    child = Server("child")

    @child.tool(name="t" * 120)
    def long_one() -> str:
        return "long"

    with pytest.raises(ValueError, match="must be 1-128 characters"):
        Server("parent").mount(child, prefix="prefix-of-nine")
