"""Resource templates against path traversal: a template variable never spans a path segment, it
is matched as the literal value, and a reserved expansion hands the raw match to a handler that
checks it."""

from __future__ import annotations

import json
import posixpath

import pytest

from fixtures.conformance import build_server
from presa_trio import InvalidParams, Server
from presa_trio.testing import RpcError, open_client


@pytest.mark.parametrize("value", ["../x", "a/b", "a?b", "a#b", "", "../../etc/passwd"])
async def test_a_template_variable_never_spans_a_path_segment(value: str) -> None:
    uri = f"test://template/{value}/data"
    async with open_client(build_server()) as client:
        with pytest.raises(RpcError) as caught:
            await client.read_resource(uri)
    assert (caught.value.code, caught.value.message, caught.value.data) == (
        -32602,
        "Resource not found",
        {"uri": uri},
    )
    assert caught.value.status == 400


@pytest.mark.parametrize("value", ["..%2Fx", "..", "%2e%2e", "..%2F..%2Fetc%2Fpasswd", "%00"])
async def test_a_template_variable_is_matched_as_the_literal_value(value: str) -> None:
    """No percent-decoding, no normalisation: the handler sees exactly the characters."""
    uri = f"test://template/{value}/data"
    async with open_client(build_server()) as client:
        result = await client.read_resource(uri)
    contents = result["contents"]
    assert len(contents) == 1 and contents[0]["uri"] == uri
    assert json.loads(contents[0]["text"])["id"] == value


RESERVED = [
    "../../etc/passwd",
    "a/../../x",
    "..%2F..%2Fetc",
    "%2e%2e/%2e%2e/x",
    "a/b/c.txt",
    "./a",
    "a//b",
    "...",
]


async def test_reserved_expansion_hands_the_raw_match_to_a_checking_handler() -> None:
    """``{+path}`` matches across ``/``; the handler receives the raw matched string and its
    own base check is what refuses ``..`` escapes."""
    server = Server("files", "1")
    received: list[str] = []

    @server.resource("file:///srv/base/{+path}")
    def read(path: str) -> str:
        received.append(path)
        resolved = posixpath.normpath(posixpath.join("/srv/base", path))
        if not resolved.startswith("/srv/base/"):
            raise InvalidParams("Path escapes the base")
        return resolved

    async with open_client(server) as client:
        outcome = {}
        for path in RESERVED:
            try:
                result = await client.read_resource(f"file:///srv/base/{path}")
                outcome[path] = result["contents"][0]["text"]
            except RpcError as error:
                outcome[path] = (error.code, error.message)
    assert received == RESERVED
    escaped = (-32602, "Path escapes the base")
    assert outcome == {
        "../../etc/passwd": escaped,
        "a/../../x": escaped,
        "..%2F..%2Fetc": "/srv/base/..%2F..%2Fetc",
        "%2e%2e/%2e%2e/x": "/srv/base/%2e%2e/%2e%2e/x",
        "a/b/c.txt": "/srv/base/a/b/c.txt",
        "./a": "/srv/base/a",
        "a//b": "/srv/base/a/b",
        "...": "/srv/base/...",
    }
