"""Multi round-trip requests: asking the client for input by answering ``input_required``.

``await ctx.input(...)`` raises ``InputRequired`` when answers are missing; the dispatcher turns
it into an ``InputRequiredResult`` with a sealed ``requestState`` (wire §10). The retry is a new,
independent request: its responses and verified state reach the handler on its ``Context``.
Pure rules only: this module never sends a request to the client (servers don't, wire §1.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidParams, MissingCapability
from .dialect import declares
from .schema import Schemas

__all__ = ["InputRequired", "elicit", "elicit_url", "list_roots", "sample"]

# Which schema $def a response to each kind of input request must satisfy.
RESPONSE_DEFINITIONS = {
    "elicitation/create": "ElicitResult",
    "sampling/createMessage": "CreateMessageResult",
    "roots/list": "ListRootsResult",
}


class InputRequired(BaseException):
    """Ends this round: the client must answer ``requests`` and retry.

    ``state`` is handler data to get back, verified, on the retry (``Context.state``). It is a
    control-flow signal, not an error: it derives from ``BaseException`` (like
    ``trio.Cancelled``) so that a tool's own ``except Exception`` cannot swallow it.
    """

    def __init__(
        self,
        requests: Mapping[str, Mapping[str, Any]] | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__("input required")
        self.requests = dict(requests or {})
        self.state = dict(state or {})


def elicit(
    message: str, properties: Mapping[str, Any], required: list[str] | None = None
) -> dict[str, Any]:
    """A form-mode ``elicitation/create`` request over flat ``properties``."""
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    if required:
        schema["required"] = list(required)
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema},
    }


def elicit_url(message: str, url: str) -> dict[str, Any]:
    """A URL-mode elicitation: the user completes it in a browser (needs ``elicitation.url``)."""
    return {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": message, "url": url},
    }


def sample(prompt: str, max_tokens: int, **params: Any) -> dict[str, Any]:
    """A ``sampling/createMessage`` request with one user text message."""
    messages = [{"role": "user", "content": {"type": "text", "text": prompt}}]
    return {
        "method": "sampling/createMessage",
        "params": {"messages": messages, "maxTokens": max_tokens, **params},
    }


def list_roots() -> dict[str, Any]:
    """A ``roots/list`` request."""
    return {"method": "roots/list", "params": {}}


def required_capability(request: Mapping[str, Any]) -> dict[str, Any]:
    """The client capability an input request needs, as a ``ClientCapabilities`` fragment."""
    method = request.get("method")
    params = request.get("params") or {}
    if method == "elicitation/create":
        return {"elicitation": {"url": {}}} if params.get("mode") == "url" else {"elicitation": {}}
    if method == "sampling/createMessage":
        sampling: dict[str, Any] = {}
        if params.get("tools") is not None or params.get("toolChoice") is not None:
            sampling["tools"] = {}
        if params.get("includeContext") not in (None, "none"):
            sampling["context"] = {}
        return {"sampling": sampling}
    if method == "roots/list":
        return {"roots": {}}
    raise ValueError(f"{method!r} is not an input request (elicitation, sampling or roots)")


def _merge(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    for key, value in more.items():
        _merge(into.setdefault(key, {}), value)


def can_ask(capabilities: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    return declares(capabilities, required_capability(request))


def check_askable(
    capabilities: Mapping[str, Any], requests: Mapping[str, Mapping[str, Any]]
) -> None:
    """Raise -32021 naming every capability the requests need and the client lacks (wire §10.5)."""
    missing: dict[str, Any] = {}
    for request in requests.values():
        needed = required_capability(request)
        if not declares(capabilities, needed):
            _merge(missing, needed)
    if missing:
        raise MissingCapability("Input requests need undeclared client capabilities", missing)


def check_responses(
    schemas: Schemas, requests: Mapping[str, Mapping[str, Any]], responses: Mapping[str, Any]
) -> None:
    """Raise -32602 for the first answer that is not its request's result type (wire §10.3).

    Answers to keys that were not asked for are ignored here; callers decide about those.
    """
    for key, request in requests.items():
        if key not in responses:
            continue
        definition = RESPONSE_DEFINITIONS.get(str(request.get("method")))
        if definition is None:
            continue
        violations = schemas.violations(definition, responses[key])
        if violations:
            raise InvalidParams(
                f"inputResponses.{key} is not a valid {definition}: {violations[0]}"
            )
