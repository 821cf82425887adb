"""Unit tests for presa_trio._protocol.input_requests: which client capability each input
request needs."""

from __future__ import annotations

from typing import Any

import pytest

from presa_trio import mrtr
from presa_trio._protocol.input_requests import (
    RESPONSE_DEFINITIONS,
    InputRequired,
    can_ask,
    check_askable,
    elicit,
    elicit_url,
    list_roots,
    required_capability,
    sample,
)
from presa_trio.errors import MissingCapability

FORM = elicit("Your name?", {"name": {"type": "string"}}, required=["name"])
URL = elicit_url("Sign in", "https://example.com/auth")
SAMPLING = sample("Summarise", 100)
SAMPLING_TOOLS = sample("Use a tool", 100, tools=[{"name": "t", "inputSchema": {"type": "object"}}])
SAMPLING_CHOICE = sample("Pick", 100, toolChoice={"mode": "auto"})
SAMPLING_CONTEXT = sample("With context", 100, includeContext="thisServer")
SAMPLING_NO_CONTEXT = sample("No context", 100, includeContext="none")
ROOTS = list_roots()


# --- builders -------------------------------------------------------------------------------


def test_elicit() -> None:
    assert FORM == {
        "method": "elicitation/create",
        "params": {
            "message": "Your name?",
            "requestedSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        },
    }
    assert "required" not in elicit("m", {})["params"]["requestedSchema"]


def test_elicit_url() -> None:
    assert URL == {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": "Sign in", "url": "https://example.com/auth"},
    }


def test_sample() -> None:
    assert SAMPLING == {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}],
            "maxTokens": 100,
        },
    }
    assert sample("p", 5, temperature=0.2)["params"]["temperature"] == 0.2


def test_list_roots() -> None:
    assert ROOTS == {"method": "roots/list", "params": {}}


def test_input_required() -> None:
    err = InputRequired({"a": FORM}, {"step": 1})
    assert err.requests == {"a": FORM}
    assert err.state == {"step": 1}
    empty = InputRequired()
    assert (empty.requests, empty.state) == ({}, {})


def test_response_definitions() -> None:
    assert RESPONSE_DEFINITIONS == {
        "elicitation/create": "ElicitResult",
        "sampling/createMessage": "CreateMessageResult",
        "roots/list": "ListRootsResult",
    }


def test_public_module_reexports_the_builders() -> None:
    assert mrtr.__all__ == ["InputRequired", "elicit", "elicit_url", "list_roots", "sample"]
    assert mrtr.elicit is elicit
    assert mrtr.InputRequired is InputRequired


# --- required_capability --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "needed"),
    [
        (FORM, {"elicitation": {}}),
        (URL, {"elicitation": {"url": {}}}),
        (SAMPLING, {"sampling": {}}),
        (SAMPLING_NO_CONTEXT, {"sampling": {}}),
        (SAMPLING_TOOLS, {"sampling": {"tools": {}}}),
        (SAMPLING_CHOICE, {"sampling": {"tools": {}}}),
        (SAMPLING_CONTEXT, {"sampling": {"context": {}}}),
        (ROOTS, {"roots": {}}),
        ({"method": "elicitation/create"}, {"elicitation": {}}),
        ({"method": "roots/list", "params": None}, {"roots": {}}),
    ],
)
def test_required_capability(request_: dict[str, Any], needed: dict[str, Any]) -> None:
    assert required_capability(request_) == needed


def test_sampling_with_tools_and_context_needs_both() -> None:
    request = sample("p", 10, tools=[], includeContext="allServers")
    assert required_capability(request) == {"sampling": {"tools": {}, "context": {}}}
    assert not can_ask({"sampling": {"tools": {}}}, request)
    assert can_ask({"sampling": {"tools": {}, "context": {}}}, request)


@pytest.mark.parametrize(
    "request_", [{"method": "tools/call"}, {"method": "ping"}, {}, {"method": None}]
)
def test_required_capability_refuses_other_methods(request_: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        required_capability(request_)


# --- can_ask --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capabilities", "request_", "expected"),
    [
        ({"elicitation": {}}, FORM, True),
        ({"elicitation": {"form": {}}}, FORM, True),
        ({}, FORM, False),
        ({"sampling": {}}, FORM, False),
        ({"elicitation": {"url": {}}}, URL, True),
        ({"elicitation": {}}, URL, False),
        ({"elicitation": {"form": {}}}, URL, False),
        ({"sampling": {}}, SAMPLING, True),
        ({}, SAMPLING, False),
        ({"sampling": {}}, SAMPLING_TOOLS, False),
        ({"sampling": {"tools": {}}}, SAMPLING_TOOLS, True),
        ({"sampling": {"tools": {}}}, SAMPLING_CHOICE, True),
        ({"sampling": {}}, SAMPLING_CONTEXT, False),
        ({"sampling": {"context": {}}}, SAMPLING_CONTEXT, True),
        ({"sampling": {}}, SAMPLING_NO_CONTEXT, True),
        ({"roots": {}}, ROOTS, True),
        ({"roots": {"listChanged": True}}, ROOTS, True),
        ({}, ROOTS, False),
        ({"roots": None}, ROOTS, False),
        ({"roots": True}, ROOTS, False),
        ({"sampling": {"tools": None}}, SAMPLING_TOOLS, False),
    ],
)
def test_can_ask(capabilities: dict[str, Any], request_: dict[str, Any], expected: bool) -> None:
    assert can_ask(capabilities, request_) is expected


# --- check_askable --------------------------------------------------------------------------


def missing(capabilities: dict[str, Any], requests: dict[str, dict[str, Any]]) -> Any:
    with pytest.raises(MissingCapability) as caught:
        check_askable(capabilities, requests)
    err = caught.value
    assert err.code == -32021
    assert err.http_status == 400
    assert set(err.data) == {"requiredCapabilities"}
    return err.data["requiredCapabilities"]


def test_check_askable_passes_when_declared() -> None:
    caps = {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}}
    check_askable(caps, {"a": FORM, "b": URL, "c": SAMPLING_TOOLS, "d": ROOTS, "e": SAMPLING})
    check_askable({}, {})


def test_listing_modes_without_form_means_no_form() -> None:
    # elicitation: {} is form only; a client that lists its modes must list "form" too.
    assert can_ask({"elicitation": {"url": {}}}, URL)
    assert not can_ask({"elicitation": {"url": {}}}, FORM)
    assert can_ask({"elicitation": {"form": {}}}, FORM)


@pytest.mark.parametrize(
    ("capabilities", "requests", "expected"),
    [
        ({}, {"a": FORM}, {"elicitation": {}}),
        ({"elicitation": {}}, {"a": URL}, {"elicitation": {"url": {}}}),
        ({}, {"a": SAMPLING, "b": ROOTS}, {"sampling": {}, "roots": {}}),
        ({"roots": {}}, {"a": SAMPLING, "b": ROOTS}, {"sampling": {}}),
        ({"sampling": {}}, {"a": SAMPLING_TOOLS, "b": SAMPLING}, {"sampling": {"tools": {}}}),
        (
            {},
            {"a": FORM, "b": SAMPLING_TOOLS, "c": ROOTS},
            {"elicitation": {}, "sampling": {"tools": {}}, "roots": {}},
        ),
    ],
)
def test_check_askable_names_what_is_missing(
    capabilities: dict[str, Any], requests: dict[str, dict[str, Any]], expected: dict[str, Any]
) -> None:
    assert missing(capabilities, requests) == expected


@pytest.mark.parametrize(
    "order", [("form", "url"), ("url", "form")], ids=["form-first", "url-first"]
)
def test_check_askable_merges_elicitation_modes(order: tuple[str, str]) -> None:
    requests = {name: {"form": FORM, "url": URL}[name] for name in order}
    assert missing({}, requests) == {"elicitation": {"url": {}}}


@pytest.mark.parametrize(
    "order", [("tools", "context"), ("context", "tools")], ids=["tools-first", "context-first"]
)
def test_check_askable_merges_sampling_sub_capabilities(order: tuple[str, str]) -> None:
    requests = {
        name: {"tools": SAMPLING_TOOLS, "context": SAMPLING_CONTEXT}[name] for name in order
    }
    assert missing({"sampling": {}}, requests) == {"sampling": {"tools": {}, "context": {}}}


@pytest.mark.parametrize(
    "order", [("plain", "tools"), ("tools", "plain")], ids=["plain-first", "tools-first"]
)
def test_check_askable_merges_sampling_levels(order: tuple[str, str]) -> None:
    requests = {name: {"plain": SAMPLING, "tools": SAMPLING_TOOLS}[name] for name in order}
    assert missing({}, requests) == {"sampling": {"tools": {}}}
