"""``ctx.service(extension)``: the service an extension's ``serve`` started for this run, typed as
what it handed to ``task_status.started`` (``Extension[MyService]``); a plain ``Extension``
subclass still works, its service typed ``Any``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import trio
from mypy import api

from presa_trio import Context, Server
from presa_trio.extensions import Extension, ExtensionContext
from presa_trio.testing import open_client

ROOT = Path(__file__).resolve().parents[2]


class Counter:
    def __init__(self) -> None:
        self.calls = 0


class Counting(Extension[Counter]):
    id = "com.example/counting"

    async def serve(
        self, context: ExtensionContext, *, task_status: trio.TaskStatus[Counter]
    ) -> None:
        task_status.started(Counter())
        await trio.sleep_forever()


class Plain(Extension):
    id = "com.example/plain"


async def test_a_handler_finds_its_runs_service_by_the_extension_or_its_id() -> None:
    counting, plain = Counting(), Plain()
    server = Server("services")
    server.add_extension(counting)
    server.add_extension(plain)

    @server.tool()
    async def count(ctx: Context) -> int:
        """Counts its calls in the run's service."""
        await trio.lowlevel.checkpoint()
        counter = ctx.service(counting)
        counter.calls += 1
        assert ctx.service(counting.id) is counter
        assert ctx.service(plain) is None  # a plain extension starts no service
        return counter.calls

    async with open_client(server) as client:
        assert (await client.call_tool("count"))["structuredContent"] == {"result": 1}
        assert (await client.call_tool("count"))["structuredContent"] == {"result": 2}
    async with open_client(server) as client:  # another run, another service
        assert (await client.call_tool("count"))["structuredContent"] == {"result": 1}


TYPED = """
    from typing import Any

    import trio
    from typing_extensions import assert_type

    from presa_trio import Context
    from presa_trio.extensions import Extension, ExtensionContext


    class Counter:
        calls = 0


    class Counting(Extension[Counter]):
        id = "com.example/counting"

        async def serve(
            self, context: ExtensionContext, *, task_status: trio.TaskStatus[Counter]
        ) -> None:
            task_status.started({started})


    class Plain(Extension):
        id = "com.example/plain"


    def handler(ctx: Context, counting: Counting, plain: Plain) -> None:
        assert_type(ctx.service(counting), Counter)
        assert_type(ctx.runtime.service(counting), Counter)
        assert_type(ctx.service(plain), Any)
        assert_type(ctx.service("com.example/counting"), Any)
"""


def check(source: str, tmp_path: Path) -> tuple[str, int]:
    path = tmp_path / "typed_service.py"
    path.write_text(textwrap.dedent(source))
    out, _, status = api.run(["--strict", "--no-error-summary", str(path)])
    return out.replace(str(path), "typed_service.py"), status


def test_the_service_is_typed_as_its_extension_says_under_strict_mypy(tmp_path: Path) -> None:
    assert check(TYPED.format(started="Counter()"), tmp_path) == ("", 0)


def test_a_service_of_another_type_is_a_type_error(tmp_path: Path) -> None:
    out, status = check(TYPED.format(started='"not a counter"'), tmp_path)
    assert status == 1
    assert '"started" of "TaskStatus" has incompatible type "str"; expected "Counter"' in out
