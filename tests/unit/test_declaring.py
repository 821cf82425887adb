"""Declaring on a ``Server``: decorators need their parentheses, and nothing is declared twice."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from presa_trio import Server


def nothing_registered(server: Server) -> bool:
    registry = server.registry
    return not (
        registry.tools
        or registry.prompts
        or registry.resources
        or registry.templates
        or registry.completers
    )


def handler() -> str:
    """A handler."""
    return "x"


@pytest.mark.parametrize("decorator", ["tool", "prompt", "resource", "completion"])
def test_bare_decorators_are_refused_with_a_hint(decorator: str) -> None:
    server = Server("bare")
    with pytest.raises(TypeError) as caught:
        getattr(server, decorator)(handler)  # what ``@server.<decorator>`` does
    assert str(caught.value) == (
        f"write @server.{decorator}(...) with parentheses, not @server.{decorator}"
    )
    assert nothing_registered(server)


def test_bare_decorator_syntax_fails_at_declaration() -> None:
    server = Server("bare")
    with pytest.raises(TypeError, match=r"parentheses"):

        @server.tool  # type: ignore[arg-type]
        def forgot() -> str:
            """Forgot the parentheses."""
            return "x"

    with pytest.raises(TypeError, match=r"parentheses"):

        @server.completion  # type: ignore[arg-type]
        def forgot_too(name: str, value: str, context: dict[str, str]) -> list[str]:
            return []

    assert nothing_registered(server)


def test_with_parentheses_everything_registers() -> None:
    server = Server("ok")
    server.tool()(handler)
    server.prompt()(handler)
    server.resource("test://r")(handler)
    server.resource("test://items/{id}")(handler)
    server.completion(prompt="handler")(handler)
    registry = server.registry
    assert list(registry.tools) == ["handler"]
    assert list(registry.prompts) == ["handler"]
    assert list(registry.resources) == ["test://r"]
    assert list(registry.templates) == ["test://items/{id}"]
    assert list(registry.completers) == [("ref/prompt", "handler")]


def test_a_second_completer_for_the_same_ref_is_refused() -> None:
    server = Server("dup")

    def first(name: str, value: str, context: dict[str, str]) -> list[str]:
        return ["first"]

    def second(name: str, value: str, context: dict[str, str]) -> list[str]:
        return ["second"]

    server.completion(prompt="p")(first)
    with pytest.raises(ValueError, match=r"a completer for 'p' is declared twice"):
        server.completion(prompt="p")(second)
    server.completion(resource="test://items/{id}")(first)
    with pytest.raises(ValueError, match=r"declared twice"):
        server.completion(resource="test://items/{id}")(second)
    server.completion(resource="p")(second)  # same name, other kind of ref: fine
    completers = server.registry.completers
    assert completers[("ref/prompt", "p")].fn is first  # never silently replaced
    assert completers[("ref/resource", "test://items/{id}")].fn is first
    assert completers[("ref/resource", "p")].fn is second


def test_completion_needs_exactly_one_ref() -> None:
    server = Server("refs")
    with pytest.raises(ValueError, match=r"exactly one"):
        server.completion()
    with pytest.raises(ValueError, match=r"exactly one"):
        server.completion(prompt="p", resource="r")


def test_duplicate_tool_prompt_and_resource_names_are_refused() -> None:
    server = Server("dup")

    def other() -> str:
        """Another handler."""
        return "y"

    server.tool()(handler)
    with pytest.raises(ValueError, match=r"tool 'handler' is declared twice"):
        server.tool()(handler)
    with pytest.raises(ValueError, match=r"tool 'handler' is declared twice"):
        server.tool("handler")(other)

    server.prompt("greet")(handler)
    with pytest.raises(ValueError, match=r"prompt 'greet' is declared twice"):
        server.prompt("greet")(other)

    server.resource("test://r")(handler)
    with pytest.raises(ValueError, match=r"resource 'test://r' is declared twice"):
        server.resource("test://r", name="other")(other)

    server.resource("test://items/{id}")(handler)
    with pytest.raises(ValueError, match=r"resource 'test://items/\{id\}' is declared twice"):
        server.resource("test://items/{id}")(other)

    registry = server.registry
    assert registry.tools["handler"].signature.fn is handler
    assert registry.prompts["greet"].signature.fn is handler
    assert registry.resources["test://r"].signature.fn is handler
    assert registry.templates["test://items/{id}"].signature.fn is handler


def test_list_requests_share_one_listing_until_something_is_declared() -> None:
    """Each ``*/list`` cuts its page from a listing built once, not from the whole registry
    walked (and the tools sorted) again; declaring anything, at any time, renews them all."""
    server = Server("listing")
    registry = server.registry
    server.tool("b")(handler)
    server.tool("a")(handler)
    server.prompt("greet")(handler)
    tools, prompts = registry.listing("tools"), registry.listing("prompts")
    assert [tool["name"] for tool in tools] == ["a", "b"]
    assert registry.listing("tools") is tools and registry.listing("prompts") is prompts
    assert registry.listing("resources") == [] and registry.listing("templates") == []

    # each kind, listed (and so kept) just before, is renewed by a declaration of its own
    server.tool("c")(handler)
    assert [tool["name"] for tool in registry.listing("tools")] == ["a", "b", "c"]
    assert [prompt["name"] for prompt in registry.listing("prompts")] == ["greet"]
    server.prompt("farewell")(handler)
    assert [prompt["name"] for prompt in registry.listing("prompts")] == ["greet", "farewell"]
    assert registry.listing("resources") == []
    server.resource("test://r")(handler)
    assert [entry["uri"] for entry in registry.listing("resources")] == ["test://r"]
    assert registry.listing("templates") == []
    server.resource("test://items/{id}")(handler)
    assert [e["uriTemplate"] for e in registry.listing("templates")] == ["test://items/{id}"]


def item(item_id: int) -> str:
    return f"item {item_id}"


def pair(kind: str, name: str) -> str:
    return f"{kind} {name}"


def anything(path: str) -> str:
    return path


TEMPLATES = [
    ("test://items/{item_id}", item),
    ("test://{kind}/{name}", pair),
    ("{+path}", anything),
    ("test://items/{kind}/{name}", pair),
    ("other://x{item_id}", item),
]
URIS = [
    "test://items/5",
    "test://items/abc",  # not an int: the next template that holds it
    "test://a/b",
    "test://items/a/b",
    "other://x7",
    "other://xy",
    "other://",
    "nothing-like-them",
    "",
]


def linear_lookup(registry: Any, uri: str) -> Any:
    """The rule ``find_resource`` keeps: exact URIs first, then each template in declaration
    order, the first whose variables convert."""
    if uri in registry.resources:
        return registry.resources[uri], {}
    for template in registry.templates.values():
        variables = template.holds(uri)
        if variables is not None:
            return template, variables
    return None


@pytest.mark.parametrize("order", list(itertools.permutations(range(len(TEMPLATES)))))
def test_a_uri_is_found_as_trying_every_template_in_turn_would(order: tuple[int, ...]) -> None:
    """Lookups try only the templates whose literal start a URI has, yet find what trying
    every one in declaration order finds, whatever that order."""
    server = Server("templates")
    for position in order:
        uri, handler = TEMPLATES[position]
        server.resource(uri)(handler)
    server.resource("test://items/7")(anything)
    for uri in [*URIS, "test://items/7"]:
        assert server.registry.find_resource(uri) == linear_lookup(server.registry, uri), uri


def test_a_template_declared_after_lookups_is_found() -> None:
    server = Server("templates")
    server.resource("test://items/{item_id}")(item)
    assert server.registry.find_resource("late://3") is None
    server.resource("late://{item_id}")(item)
    late = server.registry.templates["late://{item_id}"]
    assert server.registry.find_resource("late://3") == (late, {"item_id": 3})
