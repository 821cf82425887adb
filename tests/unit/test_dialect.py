"""Unit tests for presa_trio._protocol.dialect: per-request _meta, versions, capabilities,
logging."""

from __future__ import annotations

from typing import Any

import pytest

from presa_trio._protocol.dialect import (
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    RequestMeta,
    check_version,
    has_capability,
    has_extension,
    log_enabled,
    read_meta,
)
from presa_trio.errors import InvalidParams, UnsupportedVersion

CAPS: dict[str, Any] = {"sampling": {}, "elicitation": {"url": {}}}
INFO = {"name": "client", "version": "1.0"}


def meta(**extra: object) -> dict[str, Any]:
    fields: dict[str, Any] = {
        META_PROTOCOL_VERSION: PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES: CAPS,
    }
    fields.update(extra)
    return fields


def params_with(**extra: object) -> dict[str, Any]:
    return {"_meta": meta(**extra), "name": "echo"}


def invalid_params(params: object) -> InvalidParams:
    with pytest.raises(InvalidParams) as caught:
        read_meta(params)
    assert caught.value.code == -32602
    assert caught.value.http_status == 400
    return caught.value


def test_constants() -> None:
    assert PROTOCOL_VERSION == "2026-07-28"
    assert SUPPORTED_VERSIONS == ("2026-07-28",)
    assert META_PROTOCOL_VERSION == "io.modelcontextprotocol/protocolVersion"
    assert META_CLIENT_CAPABILITIES == "io.modelcontextprotocol/clientCapabilities"
    assert META_CLIENT_INFO == "io.modelcontextprotocol/clientInfo"
    assert META_LOG_LEVEL == "io.modelcontextprotocol/logLevel"
    assert META_PROGRESS_TOKEN == "progressToken"
    assert LOG_LEVELS == (
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    )


def test_read_meta_minimal() -> None:
    assert read_meta({"_meta": meta()}) == RequestMeta(
        protocol_version=PROTOCOL_VERSION,
        client_capabilities=CAPS,
        client_info=None,
        log_level=None,
        progress_token=None,
    )


def test_read_meta_full() -> None:
    got = read_meta(
        params_with(
            **{META_CLIENT_INFO: INFO, META_LOG_LEVEL: "warning", META_PROGRESS_TOKEN: "tok"}
        )
    )
    assert got == RequestMeta(PROTOCOL_VERSION, CAPS, INFO, "warning", "tok")


def test_read_meta_does_not_check_the_version() -> None:
    # read_meta reads; check_version judges.
    assert read_meta({"_meta": meta(**{META_PROTOCOL_VERSION: "1999-01-01"})}).protocol_version == (
        "1999-01-01"
    )


@pytest.mark.parametrize("params", [None, [], "x", 1, True, [{"_meta": {}}]])
def test_params_must_be_an_object(params: object) -> None:
    invalid_params(params)


@pytest.mark.parametrize("value", ["<missing>", None, [], "meta", 1])
def test_meta_must_be_an_object(value: object) -> None:
    params: dict[str, Any] = {"name": "x"}
    if value != "<missing>":
        params["_meta"] = value
    invalid_params(params)


@pytest.mark.parametrize("value", ["<missing>", None, 20260728, ["2026-07-28"], {"v": 1}])
def test_protocol_version_must_be_a_string(value: object) -> None:
    fields = meta()
    del fields[META_PROTOCOL_VERSION]
    if value != "<missing>":
        fields[META_PROTOCOL_VERSION] = value
    invalid_params({"_meta": fields})


@pytest.mark.parametrize("value", ["<missing>", None, [], "all", True, 1])
def test_client_capabilities_must_be_an_object(value: object) -> None:
    fields = meta()
    del fields[META_CLIENT_CAPABILITIES]
    if value != "<missing>":
        fields[META_CLIENT_CAPABILITIES] = value
    invalid_params({"_meta": fields})


def test_empty_capabilities_are_fine() -> None:
    assert read_meta({"_meta": meta(**{META_CLIENT_CAPABILITIES: {}})}).client_capabilities == {}


@pytest.mark.parametrize("info", ["client", 1, [], None, True])
def test_malformed_client_info_is_tolerated(info: object) -> None:
    assert read_meta(params_with(**{META_CLIENT_INFO: info})).client_info is None


def test_partial_client_info_object_is_kept() -> None:
    assert read_meta(params_with(**{META_CLIENT_INFO: {"name": "c"}})).client_info == {"name": "c"}


@pytest.mark.parametrize("level", LOG_LEVELS)
def test_every_log_level_is_accepted(level: str) -> None:
    assert read_meta(params_with(**{META_LOG_LEVEL: level})).log_level == level


@pytest.mark.parametrize("level", ["DEBUG", "warn", "trace", "", 3, ["debug"], {"l": 1}, True])
def test_unknown_log_levels_are_invalid(level: object) -> None:
    invalid_params(params_with(**{META_LOG_LEVEL: level}))


@pytest.mark.parametrize("token", ["t", "", 0, 7, -1, 2**70])
def test_progress_token_string_or_int(token: str | int) -> None:
    got = read_meta(params_with(**{META_PROGRESS_TOKEN: token})).progress_token
    assert got == token
    assert type(got) is type(token)


@pytest.mark.parametrize("token", [True, False, 1.0, 1.5, [], {}, ["t"]])
def test_progress_token_other_types_are_invalid(token: object) -> None:
    invalid_params(params_with(**{META_PROGRESS_TOKEN: token}))


def test_check_version_accepts_supported() -> None:
    check_version(read_meta({"_meta": meta()}))


@pytest.mark.parametrize("requested", ["2025-11-25", "2025-06-18", "", "2026-07-28 ", "latest"])
def test_check_version_refuses_unsupported(requested: str) -> None:
    with pytest.raises(UnsupportedVersion) as caught:
        check_version(read_meta({"_meta": meta(**{META_PROTOCOL_VERSION: requested})}))
    err = caught.value
    assert err.code == -32022
    assert err.http_status == 400
    assert err.data == {"supported": ["2026-07-28"], "requested": requested}
    assert err.to_error()["data"] == {"supported": ["2026-07-28"], "requested": requested}


def test_check_version_with_explicit_supported_list() -> None:
    m = read_meta({"_meta": meta(**{META_PROTOCOL_VERSION: "2025-11-25"})})
    check_version(m, ("2025-11-25", "2026-07-28"))
    with pytest.raises(UnsupportedVersion) as caught:
        check_version(m, ("2026-07-28", "2027-01-01"))
    assert caught.value.data == {
        "supported": ["2026-07-28", "2027-01-01"],
        "requested": "2025-11-25",
    }


@pytest.mark.parametrize(
    ("capabilities", "path", "expected"),
    [
        ({"sampling": {}}, ("sampling",), True),
        ({"sampling": {}}, ("sampling", "tools"), False),
        ({"sampling": {"tools": {}}}, ("sampling", "tools"), True),
        ({"elicitation": {"url": {}}}, ("elicitation", "url"), True),
        ({"elicitation": {}}, ("elicitation", "url"), False),
        ({}, ("roots",), False),
        ({"roots": None}, ("roots",), False),
        ({"roots": False}, ("roots",), False),
        ({"roots": True}, ("roots",), False),  # a declaration is an object (the schema's)
        ({"roots": "yes"}, ("roots",), False),
        ({"roots": []}, ("roots",), False),
        ({"sampling": "x"}, ("sampling", "tools"), False),
        ({"a": {}}, (), True),
    ],
)
def test_has_capability(
    capabilities: dict[str, Any], path: tuple[str, ...], expected: bool
) -> None:
    assert has_capability(capabilities, *path) is expected


@pytest.mark.parametrize(
    ("capabilities", "expected"),
    [
        ({"extensions": {"io.example/ext": {}}}, True),
        ({"extensions": {"io.example/ext": {"setting": 1}}}, True),
        ({"extensions": {"io.example/other": {}}}, False),
        ({"extensions": {"io.example/ext": True}}, False),
        ({"extensions": []}, False),
        ({"io.example/ext": {}}, False),
        ({}, False),
    ],
)
def test_has_extension(capabilities: dict[str, Any], expected: bool) -> None:
    assert has_extension(capabilities, "io.example/ext") is expected


def test_log_disabled_without_a_level() -> None:
    m = read_meta({"_meta": meta()})
    assert not any(log_enabled(m, level) for level in LOG_LEVELS)


@pytest.mark.parametrize("threshold", LOG_LEVELS)
def test_log_enabled_at_or_above_the_threshold(threshold: str) -> None:
    m = read_meta(params_with(**{META_LOG_LEVEL: threshold}))
    cut = LOG_LEVELS.index(threshold)
    assert [log_enabled(m, level) for level in LOG_LEVELS] == [
        i >= cut for i in range(len(LOG_LEVELS))
    ]
