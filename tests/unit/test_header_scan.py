"""The one pass over an HTTP request's headers (``headers.scan``)."""

from __future__ import annotations

from presa_trio._protocol.headers import scan


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
    hosts, origins, credentials, mcp = scan(raw)
    assert hosts == ["a.test", "b.test"]
    assert origins == ["http://o.test"]
    assert credentials == ["Bearer t\u00e9"]  # latin-1, as HTTP header bytes are read
    assert mcp == {"mcp-name": [b"first", b"second"], "mcp-param-region": [b"eu"]}


def test_a_request_without_those_headers_has_empty_lists() -> None:
    assert scan([(b"accept", b"*/*")]) == ([], [], [], {})
