"""Unit tests for presa_trio.errors: codes, HTTP statuses and error objects."""

from __future__ import annotations

import pytest

from presa_trio import errors
from presa_trio.errors import (
    HeaderMismatch,
    InsufficientScope,
    InternalError,
    InvalidParams,
    InvalidRequest,
    McpError,
    MethodNotFound,
    MissingCapability,
    ParseError,
    RequestTooLarge,
    ToolError,
    Unauthorized,
    UnsupportedVersion,
)


@pytest.mark.parametrize(
    ("cls", "code", "status"),
    [
        (McpError, -32603, 500),
        (ParseError, -32700, 400),
        (InvalidRequest, -32600, 400),
        (RequestTooLarge, -32600, 413),
        (Unauthorized, -32600, 401),
        (InsufficientScope, -32600, 403),
        (MethodNotFound, -32601, 404),
        (InvalidParams, -32602, 400),
        (InternalError, -32603, 500),
        (HeaderMismatch, -32020, 400),
        (MissingCapability, -32021, 400),
        (UnsupportedVersion, -32022, 400),
    ],
)
def test_code_and_status(cls: type[McpError], code: int, status: int) -> None:
    assert cls.code == code
    assert cls.http_status == status
    assert issubclass(cls, McpError)
    assert issubclass(cls, Exception)


def test_request_too_large_is_an_invalid_request() -> None:
    assert issubclass(RequestTooLarge, InvalidRequest)


def test_to_error_without_data() -> None:
    err = InvalidParams("bad params")
    assert err.message == "bad params"
    assert str(err) == "bad params"
    assert err.data is None
    assert err.to_error() == {"code": -32602, "message": "bad params"}


@pytest.mark.parametrize("data", [{"x": 1}, [1], "text", 0, False, {}])
def test_to_error_with_data(data: object) -> None:
    assert HeaderMismatch("m", data).to_error() == {"code": -32020, "message": "m", "data": data}


def test_missing_capability_data() -> None:
    err = MissingCapability("need sampling", {"sampling": {}})
    assert err.data == {"requiredCapabilities": {"sampling": {}}}
    assert err.to_error() == {
        "code": -32021,
        "message": "need sampling",
        "data": {"requiredCapabilities": {"sampling": {}}},
    }


def test_unsupported_version_data() -> None:
    err = UnsupportedVersion("2025-06-18", ["2026-07-28"])
    assert err.to_error()["code"] == -32022
    assert err.data == {"supported": ["2026-07-28"], "requested": "2025-06-18"}


def test_tool_error_is_not_a_protocol_error() -> None:
    assert not issubclass(ToolError, McpError)
    assert issubclass(ToolError, Exception)


def test_errors_all() -> None:
    assert errors.__all__ == sorted(errors.__all__)
    for name in errors.__all__:
        assert isinstance(getattr(errors, name), type), name
    public = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, Exception) and not name.startswith("_")
    }
    assert set(errors.__all__) == public


def test_authorization_errors_carry_their_challenge() -> None:
    assert InvalidParams("x").http_headers == ()
    challenge = 'Bearer resource_metadata="https://h/.well-known/oauth-protected-resource"'
    unauthorized = Unauthorized("Unauthorized: a bearer token is required", challenge)
    assert unauthorized.http_headers == (("www-authenticate", challenge),)
    assert unauthorized.to_error() == {
        "code": -32600,
        "message": "Unauthorized: a bearer token is required",
    }
    scoped = InsufficientScope("Forbidden: more", 'Bearer error="insufficient_scope"', ["a"])
    assert scoped.http_headers == (("www-authenticate", 'Bearer error="insufficient_scope"'),)
    assert scoped.to_error()["data"] == {"requiredScopes": ["a"]}
