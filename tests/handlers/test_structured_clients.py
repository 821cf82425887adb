"""Typed results reach the published clients: FastMCP's client hands back each tool's value as
its ``.data`` (a wrapped one unwrapped, by the schema's ``x-fastmcp-wrap-result``), and the
official MCP SDK's client gets ``structured_content`` as the SDK's own servers send it
(``{"result": ...}`` for what is not an object), against a real hypercorn trio worker."""

from __future__ import annotations

import pytest
from support.servers import ROOT, run_client, running

pytestmark = pytest.mark.e2e

HERE = ROOT / "tests" / "support"


def test_fastmcp_data_and_sdk_structured_content_for_each_hint() -> None:
    with running("structured_app:app", HERE) as served:
        seen = run_client(HERE / "structured_client.py", f"http://127.0.0.1:{served.port}/mcp")
    assert seen["fastmcp"] == {
        "counts": {"tea": 2, "cake": 1},
        "greeting": "Hello, Ada",
        "double": 42,
        "totals": {"class": "Totals", "count": 2, "names": ["a", "b"]},
        "points": [{"x": 1.0, "y": 2.0}, {"x": 3.0, "y": 4.5}],
        "reading": {"class": "Reading", "sensor": "north", "value": 21.5},
        "maybe": {"x": 0.5, "y": 0.25},
        "nothing": None,  # -> None is content: no schema, nothing structured
    }
    assert seen["sdk"] == {
        "counts": {"tea": 2, "cake": 1},
        "greeting": {"result": "Hello, Ada"},
        "double": {"result": 42},
        "totals": {"count": 2, "names": ["a", "b"]},
        "points": {"result": [{"x": 1.0, "y": 2.0}, {"x": 3.0, "y": 4.5}]},
        "reading": {"sensor": "north", "value": 21.5},
        "maybe": {"result": {"x": 0.5, "y": 0.25}},
        "nothing": None,
    }
