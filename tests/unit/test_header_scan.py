"""The HTTP edge's one pass over the request headers (``_scan_headers``)."""

from __future__ import annotations

from presa_trio._transports import asgi
from presa_trio._transports.asgi import _scan_headers


def test_every_value_is_kept_in_order_whatever_the_names_case() -> None:
    raw = [
        (b"Host", b"a.test"),
        (b"content-type", b"application/json"),
        (b"MCP-Name", b"first"),
        (b"host", b"b.test"),
        (b"Origin", b"http://o.test"),
        (b"x-mcp-name", b"not ours"),
        (b"mcp-name", b"second"),
        (b"AUTHORIZATION", b"Bearer t\xe9"),
        (b"Mcp-Param-Region", b"eu"),
    ]
    hosts, origins, credentials, mcp = _scan_headers(raw)
    assert hosts == ["a.test", "b.test"]
    assert origins == ["http://o.test"]
    assert credentials == ["Bearer t\u00e9"]  # latin-1, as HTTP header bytes are read
    assert mcp == {"mcp-name": [b"first", b"second"], "mcp-param-region": [b"eu"]}


def test_a_request_without_those_headers_has_empty_lists() -> None:
    assert _scan_headers([(b"accept", b"*/*")]) == ([], [], [], {})


def test_the_names_remembered_are_bounded() -> None:
    asgi._KINDS.clear()
    long_name = b"mcp-" + b"x" * 4_000  # read, never remembered
    assert _scan_headers([(long_name, b"v")])[3] == {long_name.decode(): [b"v"]}
    assert asgi._KINDS == {}
    for n in range(1_000):  # a client inventing a name per header
        _scan_headers([(f"x-invented-{n}".encode(), b"v")])
    assert len(asgi._KINDS) == asgi._MAX_KINDS
    # names first met once it is full are still read right, every time
    for _ in range(2):
        assert _scan_headers([(b"HOST", b"h"), (b"Mcp-Name", b"n")]) == (
            ["h"],
            [],
            [],
            {"mcp-name": [b"n"]},
        )
    assert b"HOST" not in asgi._KINDS
    asgi._KINDS.clear()
