"""Unit tests for presa_trio._protocol.headers: SEP-2243 routing headers against the body."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from presa_trio._protocol.headers import (
    METHOD_HEADER,
    NAME_HEADER,
    PROTOCOL_VERSION_HEADER,
    HeaderParam,
    RoutingHeaders,
    check_method,
    check_name,
    check_params,
    check_protocol_version_matches,
    check_protocol_version_present,
    decode_value,
    header_params_of,
)
from presa_trio.errors import HeaderMismatch

Raw = list[tuple[bytes, bytes]]


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def assert_mismatch(call: Any, *args: Any) -> None:
    with pytest.raises(HeaderMismatch) as caught:
        call(*args)
    assert caught.value.code == -32020
    assert caught.value.http_status == 400


# --- RoutingHeaders -------------------------------------------------------------------------


def test_constants() -> None:
    assert PROTOCOL_VERSION_HEADER == "mcp-protocol-version"
    assert METHOD_HEADER == "mcp-method"
    assert NAME_HEADER == "mcp-name"


@pytest.mark.parametrize("name", [b"mcp-method", b"MCP-METHOD", b"Mcp-Method", b"mCp-MeThOd"])
def test_names_are_case_insensitive(name: bytes) -> None:
    assert RoutingHeaders([(name, b"tools/call")]).get("mcp-method") == "tools/call"


@pytest.mark.parametrize(
    "raw", [b"  tools/call", b"tools/call  ", b"\ttools/call\t", b" \t tools/call \t "]
)
def test_values_are_trimmed_of_spaces_and_tabs(raw: bytes) -> None:
    assert RoutingHeaders([(b"mcp-method", raw)]).get("mcp-method") == "tools/call"


def test_inner_spaces_are_kept() -> None:
    assert RoutingHeaders([(b"mcp-name", b" a b ")]).get("mcp-name") == "a b"


def test_absent_header_is_none() -> None:
    headers = RoutingHeaders([(b"host", b"localhost"), (b"content-type", b"application/json")])
    assert headers.get("mcp-method") is None
    assert headers.decoded("mcp-name") is None


def test_non_mcp_headers_are_not_kept() -> None:
    headers = RoutingHeaders([(b"host", b"a"), (b"host", b"b")])
    assert headers.get("host") is None  # repeats of other headers are not our business


@pytest.mark.parametrize(
    "name", ["mcp-protocol-version", "mcp-method", "mcp-name", "mcp-param-region"]
)
def test_repeated_mcp_header_is_a_mismatch(name: str) -> None:
    headers = RoutingHeaders([(name.encode(), b"a"), (name.upper().encode(), b"a")])
    assert_mismatch(headers.get, name)
    assert_mismatch(headers.decoded, name)


@pytest.mark.parametrize(
    "raw", [b"caf\x80", b"a\x00b", b"del\x7f", b"\xff", "é".encode(), b"a\nb", b"a\rb", b"\x1f"]
)
def test_bytes_outside_visible_ascii_are_a_mismatch(raw: bytes) -> None:
    assert_mismatch(RoutingHeaders([(b"mcp-name", raw)]).get, "mcp-name")


def test_a_bad_value_is_refused_every_time_and_a_good_one_read_every_time() -> None:
    """Values are read once per distinct value (a cache): what it keeps changes no answer."""
    for _ in range(3):
        assert_mismatch(RoutingHeaders([(b"mcp-name", b"bad\x00")]).get, "mcp-name")
        assert RoutingHeaders([(b"mcp-name", b" ok\t")]).get("mcp-name") == "ok"
        with pytest.raises(HeaderMismatch) as caught:  # the same value under another name
            RoutingHeaders([(b"mcp-method", b"bad\x00")]).get("mcp-method")
        assert caught.value.message == "Header mcp-method has characters outside visible ASCII"


def test_all_visible_ascii_is_accepted() -> None:
    visible = bytes(range(0x21, 0x7F))
    assert RoutingHeaders([(b"mcp-name", visible)]).get("mcp-name") == visible.decode()


# --- decode_value ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("=?base64?SGVsbG8=?=", "Hello"),
        (b64("héllo ☃ 日本"), "héllo ☃ 日本"),
        (b64("  padded  "), "  padded  "),
        (b64("line\nbreak"), "line\nbreak"),
        ("=?base64??=", ""),
    ],
)
def test_base64_sentinel_is_decoded(value: str, expected: str) -> None:
    assert decode_value("mcp-name", value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "SGVsbG8=",
        "=?base64?SGVsbG8=",
        "SGVsbG8=?=",
        "=?BASE64?SGVsbG8=?=",
        "=?Base64?SGVsbG8=?=",
        "=?base64?=",
        "plain",
        "",
    ],
)
def test_other_values_are_literals(value: str) -> None:
    assert decode_value("mcp-name", value) == value


@pytest.mark.parametrize(
    "value",
    [
        "=?base64?SGVsbG8?=",  # bad padding
        "=?base64?SGVs!!!bG8=?=",  # bad alphabet
        "=?base64?SGVs bG8=?=",  # space inside
        "=?base64?SGVsbG8=x?=",  # data after padding
        "=?base64?/w==?=",  # 0xff: not UTF-8
        "=?base64?wyg=?=",  # 0xc3 0x28: invalid UTF-8 sequence
        "=?base64?7aCA?=",  # an encoded surrogate
    ],
)
def test_invalid_base64_or_utf8_is_a_mismatch(value: str) -> None:
    assert_mismatch(decode_value, "mcp-name", value)


def test_decoded_reads_through_the_header() -> None:
    headers = RoutingHeaders([(b"Mcp-Name", b"  =?base64?SGVsbG8=?=  ")])
    assert headers.get("mcp-name") == "=?base64?SGVsbG8=?="
    assert headers.decoded("mcp-name") == "Hello"


# --- protocol version, method, name ---------------------------------------------------------


def test_protocol_version_present() -> None:
    headers = RoutingHeaders([(b"MCP-Protocol-Version", b"2026-07-28")])
    assert check_protocol_version_present(headers) == "2026-07-28"
    assert_mismatch(check_protocol_version_present, RoutingHeaders([]))


def test_protocol_version_matches() -> None:
    check_protocol_version_matches("2026-07-28", "2026-07-28")
    assert_mismatch(check_protocol_version_matches, "2025-11-25", "2026-07-28")


def test_method_must_equal_exactly() -> None:
    check_method(RoutingHeaders([(b"Mcp-Method", b" tools/call ")]), "tools/call")


@pytest.mark.parametrize("value", [b"Tools/Call", b"TOOLS/CALL", b"tools/list", b"tools/call/"])
def test_method_mismatch(value: bytes) -> None:
    assert_mismatch(check_method, RoutingHeaders([(b"mcp-method", value)]), "tools/call")


def test_method_missing() -> None:
    assert_mismatch(check_method, RoutingHeaders([]), "tools/call")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(b"echo", "echo"), (b"=?base64?SGVsbG8=?=", "Hello"), (b64("日本").encode(), "日本")],
)
def test_name_matches_after_decoding(raw: bytes, expected: str) -> None:
    check_name(RoutingHeaders([(b"Mcp-Name", raw)]), expected)


@pytest.mark.parametrize(
    ("raw", "expected"), [(b"Echo", "echo"), (b"=?base64?SGVsbG8=?=", "hello"), (b"x", "")]
)
def test_name_mismatch(raw: bytes, expected: str) -> None:
    assert_mismatch(check_name, RoutingHeaders([(b"mcp-name", raw)]), expected)


def test_name_missing() -> None:
    assert_mismatch(check_name, RoutingHeaders([]), "echo")


def test_name_with_invalid_base64() -> None:
    assert_mismatch(check_name, RoutingHeaders([(b"mcp-name", b"=?base64?SGVsbG8?=")]), "Hello")


# --- check_params ---------------------------------------------------------------------------

REGION = HeaderParam(("region",), "Region", "string")
COUNT = HeaderParam(("count",), "Count", "integer")
DRY = HeaderParam(("dry",), "Dry-Run", "boolean")
NESTED = HeaderParam(("target", "zone"), "Zone", "string")


def headers_of(**values: str) -> RoutingHeaders:
    return RoutingHeaders(
        [(f"Mcp-Param-{name.replace('_', '-')}".encode(), v.encode()) for name, v in values.items()]
    )


@pytest.mark.parametrize(
    ("param", "header", "body"),
    [
        (REGION, "eu-west", "eu-west"),
        (REGION, "=?base64?SGVsbG8=?=", "Hello"),
        (REGION, b64("日本"), "日本"),
        (COUNT, "42", 42),
        (COUNT, "42.0", 42),
        (COUNT, "-7", -7),
        (COUNT, "0", 0),
        (DRY, "true", True),
        (DRY, "false", False),
    ],
)
def test_params_match(param: HeaderParam, header: str, body: object) -> None:
    headers = RoutingHeaders([(f"mcp-param-{param.header}".encode(), header.encode())])
    check_params(headers, [param], {param.path[0]: body})


def test_param_header_name_is_case_insensitive() -> None:
    check_params(RoutingHeaders([(b"MCP-PARAM-REGION", b"eu")]), [REGION], {"region": "eu"})


@pytest.mark.parametrize(
    ("param", "header", "body"),
    [
        (REGION, "eu-west", "eu-east"),
        (REGION, "EU-WEST", "eu-west"),
        (REGION, "42", 42.5),
        (COUNT, "43", 42),
        (COUNT, "forty-two", 42),
        (COUNT, "", 42),
        (COUNT, "true", 1),
        (COUNT, "1", True),
        (DRY, "1", True),
        (DRY, "0", False),
        (DRY, "True", True),
        (DRY, "false", True),
        (DRY, "true", False),
        (REGION, "x", ["x"]),
        (REGION, "x", {"x": 1}),
    ],
)
def test_params_mismatch(param: HeaderParam, header: str, body: object) -> None:
    headers = RoutingHeaders([(f"mcp-param-{param.header}".encode(), header.encode())])
    assert_mismatch(check_params, headers, [param], {param.path[0]: body})


def test_body_present_header_missing() -> None:
    assert_mismatch(check_params, RoutingHeaders([]), [REGION], {"region": "eu"})


@pytest.mark.parametrize("arguments", [{}, {"region": None}, {"other": "eu"}])
def test_header_present_body_absent_or_null(arguments: dict[str, Any]) -> None:
    assert_mismatch(check_params, headers_of(Region="eu"), [REGION], arguments)


def test_both_absent_is_fine() -> None:
    check_params(RoutingHeaders([]), [REGION, COUNT, DRY, NESTED], {})


def test_repeated_param_header() -> None:
    headers = RoutingHeaders([(b"mcp-param-region", b"eu"), (b"Mcp-Param-Region", b"eu")])
    assert_mismatch(check_params, headers, [REGION], {"region": "eu"})


def test_invalid_base64_param() -> None:
    assert_mismatch(
        check_params, headers_of(Region="=?base64?SGVsbG8?="), [REGION], {"region": "x"}
    )


def test_nested_param() -> None:
    check_params(headers_of(Zone="z1"), [NESTED], {"target": {"zone": "z1"}})
    assert_mismatch(check_params, headers_of(Zone="z2"), [NESTED], {"target": {"zone": "z1"}})
    assert_mismatch(check_params, RoutingHeaders([]), [NESTED], {"target": {"zone": "z1"}})
    assert_mismatch(check_params, headers_of(Zone="z1"), [NESTED], {"target": "z1"})
    check_params(RoutingHeaders([]), [NESTED], {"target": "z1"})


def test_all_params_are_checked() -> None:
    arguments = {"region": "eu", "count": 3, "dry": True}
    check_params(
        headers_of(Region="eu", Count="3", Dry_Run="true"), [REGION, COUNT, DRY], arguments
    )
    assert_mismatch(
        check_params,
        headers_of(Region="eu", Count="3", Dry_Run="false"),
        [REGION, COUNT, DRY],
        arguments,
    )


# --- header_params_of -----------------------------------------------------------------------


def prop(header: object, json_type: object = "string", **extra: Any) -> dict[str, Any]:
    return {"type": json_type, "x-mcp-header": header, **extra}


def test_header_params_of_flat() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": prop("Region"),
            "count": prop("Count", "integer"),
            "dry": prop("Dry-Run", "boolean"),
            "plain": {"type": "string"},
        },
    }
    assert header_params_of(schema) == (
        HeaderParam(("region",), "Region", "string"),
        HeaderParam(("count",), "Count", "integer"),
        HeaderParam(("dry",), "Dry-Run", "boolean"),
    )


def test_header_params_of_nested() -> None:
    schema = {
        "type": "object",
        "properties": {
            "target": {
                "type": "object",
                "properties": {
                    "zone": prop("Zone"),
                    "deep": {"type": "object", "properties": {"id": prop("Id", "integer")}},
                },
            }
        },
    }
    assert header_params_of(schema) == (
        HeaderParam(("target", "zone"), "Zone", "string"),
        HeaderParam(("target", "deep", "id"), "Id", "integer"),
    )


def test_header_params_of_none() -> None:
    assert header_params_of({"type": "object"}) == ()
    assert header_params_of({"type": "object", "properties": {"a": {"type": "string"}}}) == ()


@pytest.mark.parametrize(
    "header", ["", "Bad Name", "a/b", "a:b", "caf\u00e9", "x(y)", 'q"', 5, True, ["A"]]
)
def test_header_name_must_be_a_token(header: object) -> None:
    with pytest.raises(ValueError):
        header_params_of({"properties": {"a": prop(header)}})


@pytest.mark.parametrize("header", ["A", "x-y_z.1", "!#$%&'*+-.^_`|~", "Region2"])
def test_token_names_are_accepted(header: str) -> None:
    assert header_params_of({"properties": {"a": prop(header)}})[0].header == header


@pytest.mark.parametrize(("first", "second"), [("Region", "Region"), ("Region", "region")])
def test_duplicate_header_names(first: str, second: str) -> None:
    with pytest.raises(ValueError):
        header_params_of({"properties": {"a": prop(first), "b": prop(second)}})


def test_duplicate_across_nesting() -> None:
    schema = {
        "properties": {
            "a": prop("Zone"),
            "b": {"type": "object", "properties": {"c": prop("ZONE")}},
        }
    }
    with pytest.raises(ValueError):
        header_params_of(schema)


@pytest.mark.parametrize(
    "json_type", ["number", "object", "array", "null", None, ["string", "null"]]
)
def test_unsupported_types(json_type: object) -> None:
    with pytest.raises(ValueError):
        header_params_of({"properties": {"a": prop("A", json_type)}})


def test_missing_type() -> None:
    with pytest.raises(ValueError):
        header_params_of({"properties": {"a": {"x-mcp-header": "A"}}})


def test_header_params_roundtrip_with_check_params() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": prop("Region"),
            "opts": {"type": "object", "properties": {"limit": prop("Limit", "integer")}},
        },
    }
    params = header_params_of(schema)
    check_params(
        headers_of(Region="eu", Limit="10"), params, {"region": "eu", "opts": {"limit": 10}}
    )
    assert_mismatch(
        check_params,
        headers_of(Region="eu", Limit="11"),
        params,
        {"region": "eu", "opts": {"limit": 10}},
    )
