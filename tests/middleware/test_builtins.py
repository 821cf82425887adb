"""The middleware presa_trio ships: ``RequestLog`` (a line per request, timed on trio's
clock), ``RateLimit`` (a token bucket per principal on trio's clock, bounded) and
``ErrorReporter`` (unexpected exceptions to a callback, cancellation untouched)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

from presa_trio import Context, Server
from presa_trio.errors import CapacityExceeded, InvalidParams
from presa_trio.middleware import ErrorReporter, RateLimit, RequestLog
from presa_trio.mrtr import elicit
from presa_trio.testing import RpcError, open_client, open_session


def who(ctx: Context) -> str:
    """The principal is whoever the arguments say: enough to tell two apart in a test."""
    return str((ctx.params.get("arguments") or {}).get("who", ""))


def build(principal: Any = who) -> Server:
    server = Server("shop", principal=principal)

    @server.tool()
    async def buy(who: str, seconds: float = 0.0) -> str:
        await trio.sleep(seconds)
        return f"sold to {who}"

    @server.tool()
    async def fail(who: str) -> str:
        raise KeyError(who)

    @server.tool()
    async def reject(who: str) -> str:
        raise InvalidParams("Not for sale")

    @server.tool()
    async def confirm(ctx: Context, who: str) -> str:
        await ctx.input({"ok": elicit("Sure?", {"ok": {"type": "boolean"}})})
        return "ok"

    return server


# ---------------------------------------------------------------------- RateLimit


async def test_the_eleventh_call_in_a_second_is_refused_and_another_principal_passes(
    mock_clock: trio.testing.MockClock,
) -> None:
    server = build()
    server.add_middleware(RateLimit(per_second=10))
    async with open_client(server) as client:
        for _ in range(10):
            await client.call_tool("buy", {"who": "alice"})
        with pytest.raises(RpcError) as refused:
            await client.call_tool("buy", {"who": "alice"})
        other = await client.call_tool("buy", {"who": "bob"})
        mock_clock.jump(0.1)  # a tenth of a second gives alice one call back
        again = await client.call_tool("buy", {"who": "alice"})
        with pytest.raises(RpcError) as still:
            await client.call_tool("buy", {"who": "alice"})
    assert (refused.value.code, refused.value.status, refused.value.data) == (
        -32603,
        503,
        {"retryable": True, "limit": "requests_per_second"},
    )
    assert other["content"][0]["text"] == "sold to bob"
    assert again["content"][0]["text"] == "sold to alice"
    assert still.value.code == -32603


async def test_on_an_older_era_session_the_refusal_is_its_error_in_a_200(
    mock_clock: trio.testing.MockClock,
) -> None:
    server = build(principal=lambda ctx: "carol")  # a session is its principal's
    server.add_middleware(RateLimit(per_second=2, methods={"tools/call"}))
    async with open_session(server) as session:
        for _ in range(2):
            await session.call_tool("buy", {"who": "carol"})
        with pytest.raises(RpcError) as refused:
            await session.call_tool("buy", {"who": "carol"})
        assert await session.request("ping") == {}  # not a limited method
    assert (refused.value.code, refused.value.status, refused.value.data) == (
        -32603,
        200,
        {"retryable": True, "limit": "requests_per_second"},
    )


def test_a_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    limit = RateLimit(per_second=2, burst=4)
    for _ in range(4):
        limit.take("p", 0.0)
    with pytest.raises(CapacityExceeded):
        limit.take("p", 0.0)
    limit.take("p", 0.5)  # one more token after half a second
    with pytest.raises(CapacityExceeded):
        limit.take("p", 0.5)
    for _ in range(4):  # a long pause fills the bucket, never past the burst
        limit.take("p", 100.0)
    with pytest.raises(CapacityExceeded):
        limit.take("p", 100.0)


def test_a_clock_that_goes_back_takes_nothing_away() -> None:
    """Each trio run's clock starts somewhere else: a server run again keeps its limit."""
    limit = RateLimit(per_second=1, burst=2)
    limit.take("p", 1000.0)
    limit.take("p", 5.0)
    with pytest.raises(CapacityExceeded):
        limit.take("p", 5.0)


def test_principals_past_the_bound_are_forgotten_least_recent_first() -> None:
    limit = RateLimit(per_second=1, max_principals=3)
    for principal in ("a", "b", "c"):
        limit.take(principal, 0.0)
    with pytest.raises(CapacityExceeded):
        limit.take("a", 0.0)  # "a" is now the most recently seen
    limit.take("d", 0.0)  # "b" is forgotten
    assert limit.principals == 3
    limit.take("b", 0.0)  # a full bucket again; "c" goes
    with pytest.raises(CapacityExceeded):
        limit.take("a", 0.0)  # remembered all along
    assert limit.principals == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"per_second": 0}, "per_second must be a positive number"),
        ({"per_second": float("nan")}, "per_second must be a positive number"),
        ({"per_second": 1, "burst": 0}, "burst must be at least 1"),
        ({"per_second": 1, "max_principals": 0}, "max_principals must be at least 1"),
    ],
)
def test_a_rate_limit_that_cannot_work_is_refused_when_made(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        RateLimit(**options)


def test_the_burst_defaults_to_the_rate_rounded_up() -> None:
    assert (RateLimit(per_second=2.5).burst, RateLimit(per_second=0.2).burst) == (3, 1)


# ---------------------------------------------------------------------- RequestLog


async def test_one_line_per_request_with_its_outcome_and_its_time(
    mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = build()
    server.add_middleware(RequestLog())
    async with open_client(server) as client:
        with caplog.at_level(logging.INFO, "presa_trio.middleware.requests"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "buy", {"who": "a", "seconds": 0.25})
                await trio.testing.wait_all_tasks_blocked()
                mock_clock.jump(0.25)
            await client.call_tool("confirm", {"who": "a"})
            with pytest.raises(RpcError):
                await client.call_tool("reject", {"who": "a"})
            with pytest.raises(RpcError):
                await client.call_tool("fail", {"who": "a"})
            await client.list_tools()
    lines = [r.getMessage() for r in caplog.records if r.name == "presa_trio.middleware.requests"]
    assert lines == [
        "tools/call buy: complete, 250.0 ms",
        "tools/call confirm: input_required, 0.0 ms",
        "tools/call reject: error -32602, 0.0 ms",
        "tools/call fail: crashed (KeyError), answered -32603, 0.0 ms",
        "tools/list: complete, 0.0 ms",
    ]
    first = next(r for r in caplog.records if r.name == "presa_trio.middleware.requests")
    assert (first.mcp_outcome, first.duration_ms) == ("complete", 250.0)  # type: ignore[attr-defined]


async def test_a_request_cancelled_is_logged_as_cancelled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = build()
    server.add_middleware(RequestLog(logging.getLogger("shop.requests"), logging.WARNING))
    async with open_client(server) as client:
        with caplog.at_level(logging.WARNING, "shop.requests"):
            with trio.move_on_after(0.05):
                await client.call_tool("buy", {"who": "a", "seconds": 60})
            await trio.testing.wait_all_tasks_blocked()
    (record,) = [r for r in caplog.records if r.name == "shop.requests"]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("tools/call buy: cancelled, ")


# ---------------------------------------------------------------------- ErrorReporter


async def test_unexpected_exceptions_are_reported_and_still_answered_minus_32603(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reported: list[tuple[str, BaseException]] = []
    server = build()
    server.add_middleware(ErrorReporter(lambda ctx, exc: reported.append((ctx.principal, exc))))
    async with open_client(server) as client:
        with caplog.at_level(logging.CRITICAL, "presa_trio"), pytest.raises(RpcError) as crashed:
            await client.call_tool("fail", {"who": "dave"})
        with pytest.raises(RpcError) as rejected:
            await client.call_tool("reject", {"who": "dave"})
        await client.call_tool("buy", {"who": "dave"})
    assert (crashed.value.code, crashed.value.message) == (-32603, "Internal error")
    assert rejected.value.code == -32602  # an McpError is an answer: not reported
    ((principal, error),) = reported
    assert principal == "dave" and isinstance(error, KeyError)


async def test_a_failing_callback_is_logged_and_the_answer_is_unchanged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(ctx: Context, exc: BaseException) -> None:
        raise RuntimeError("tracker down")

    server = build()
    server.add_middleware(ErrorReporter(broken))
    async with open_client(server) as client:
        with caplog.at_level(logging.ERROR, "presa_trio"), pytest.raises(RpcError) as crashed:
            await client.call_tool("fail", {"who": "erin"})
    assert (crashed.value.code, crashed.value.message, crashed.value.status) == (
        -32603,
        "Internal error",
        500,
    )
    assert "the ErrorReporter callback failed on a tools/call error" in caplog.text
    assert "tracker down" in caplog.text


async def test_cancellation_is_never_reported_and_goes_on() -> None:
    reported: list[BaseException] = []
    server = build()
    server.add_middleware(ErrorReporter(lambda ctx, exc: reported.append(exc)))
    async with open_client(server) as client:
        with trio.move_on_after(0.05) as gave_up:
            await client.call_tool("buy", {"who": "a", "seconds": 60})
        await trio.testing.wait_all_tasks_blocked()
    assert gave_up.cancelled_caught
    assert reported == []
