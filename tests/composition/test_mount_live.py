"""Composition under a real hypercorn trio worker on 127.0.0.1: two servers mounted in a
third, served on one endpoint by one run (``tests/support/composed_app.py``): their tools,
resources and prompts under their prefixes, their lifespans nested in the parent's for the
worker's life, and the parent's middleware (a rate limit) over all of them."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.live_http import call, mcp_request, request
from support.servers import SUPPORT, running

pytestmark = pytest.mark.e2e


async def test_one_endpoint_serves_the_mounted_servers(tmp_path: Path) -> None:
    events = tmp_path / "lifespans.log"
    with running("composed_app:app", SUPPORT, env={"COMPOSED_LOG": str(events)}) as served:
        port = served.port
        tools = await call(port, "tools/list")
        forecast = await call(
            port, "tools/call", {"name": "weather_forecast", "arguments": {"city": "Oslo"}}
        )
        read = await call(port, "resources/read", {"uri": "data://weather/stations/south"})
        prompt = await call(
            port, "prompts/get", {"name": "weather_outlook", "arguments": {"city": "Rome"}}
        )
        completed = await call(
            port,
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "weather_outlook"},
             "argument": {"name": "city", "value": "Pa"}},
        )  # fmt: skip
        statuses = []
        for _ in range(8):  # the rate limit: 5 calls at once (one made), then 503
            body, headers = mcp_request(
                "tools/call", {"name": "notes_forecast_note", "arguments": {}}
            )
            response = await request(port, body, headers)
            statuses.append((response.status, response.messages[-1].get("error", {}).get("code")))
        assert served.stop() == 0
    assert [t["name"] for t in tools["tools"]] == [
        "notes_forecast_note",
        "weather_forecast",
        "weather_stations_count",
        "whoami",
    ]
    assert forecast["content"][0]["text"] == "Oslo: sunny (lifespan of weather)"
    assert read["contents"][0]["text"] == "station south (lifespan of weather)"
    assert prompt["messages"][0]["content"]["text"] == "What is the outlook for Rome?"
    assert completed["completion"]["values"] == ["Paris"]
    # one call is earned back every two seconds: never four while the test runs
    assert statuses[:4] == [(200, None)] * 4
    assert (503, -32603) in statuses[4:]
    assert events.read_text().splitlines() == [
        "enter main (main)",
        "enter weather (weather)",
        "enter notes (notes)",
        "exit notes",
        "exit weather",
        "exit main",
    ]
