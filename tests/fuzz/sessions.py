"""Fuzzing the older era's sessions (2025-06-18, 2025-11-25) over HTTP, and its oracle.

Two families, registered in ``strategies.FAMILIES`` and played by its ``Harness`` on a
fixture server of their own (``SERVER_OPTIONS``: small session bounds, a short push timeout,
the principal named by an ``Mcp-Tenant`` header):

- "sessions": a scenario opens one or two sessions (Alice's, and maybe Bob's) and plays steps
  against them: ``initialize`` with junk params and versions, requests, notifications and
  client answers naming a session by a right, foreign, unknown, empty, oversized, padded,
  non-ASCII or repeated ``Mcp-Session-Id``, with any ``MCP-Protocol-Version`` (none, older,
  2026-07-28, junk, repeated), GET and DELETE with and without a session, a second GET while
  one is held, a GET resuming a stream by ``Last-Event-ID`` (one the server gave, on its own
  session or another's, past a stream's end, forged, junk), and messages that mix the eras
  (an older version header with a 2026-07-28 ``_meta``, a session header with one, a
  2026-07-28 header on an ``initialize``);
- "pushes": tools that push requests to the client on a session, answered well, badly, with
  an error, twice, after an answer to an unknown id, from another session, never, by a
  ``notifications/cancelled``, after the session ended, or by a client that goes away.

``model_post`` and ``model_exchange`` (GET, DELETE) decide what each exchange deserves from
the documented rules alone (the session header first, then the version header, then the
body; a session is its principal's and nobody else's; errors on a live session are HTTP
200; a malformed or unserved version header is 400), as a ``Verdict``, from the scenario's
``World`` (which sessions it opened, whose, which still live); ``judge`` checks the answer:
well-formed JSON-RPC (the session version's schema for what the server writes), the right
status for the code, the id echoed, nothing of Python's internals, no traceback or ERROR
logged, never a hang. A message the 2026-07-28 rules decide goes to ``strategies.check``.
After every scenario the harness checks that nothing is held (``Harness.settled``).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

import trio
from hypothesis import strategies as st

from presa_trio import Context, Sessions
from presa_trio._protocol.schema import Schemas, load_document
from presa_trio.testing import Client

from .strategies import (
    _EXCEPTION_NAME,
    MRTR_TOOLS,
    PROMPT_NAMES,
    ROUTED,
    TOOL_NAMES,
    Answer,
    Case,
    Envelope,
    Play,
    Scenario,
    Tap,
    _check_logs,
    _params_for,
    _parse_sse,
    _tool_arguments,
    check,
    classify,
    json_objects,
    json_scalars,
    json_values,
    metas,
    one_in,
    request_ids,
    to_json,
    uris,
    weighted,
)

LEGACY = ("2025-11-25", "2025-06-18")  # newest first, as the server negotiates
MODERN = "2026-07-28"
PUSH_TIMEOUT = 0.05  # the fuzz server's push_timeout, seconds
SESSION_LIMIT = 20  # sessions per principal (each scenario ends the ones it opened)
TENANTS = ("alice", "bob", "mallory")


def tenant_of(ctx: Context) -> str:
    return (ctx.headers.get("mcp-tenant") if ctx.headers else None) or "nobody"


SERVER_OPTIONS: dict[str, Any] = {
    "sessions": Sessions(
        push_timeout=PUSH_TIMEOUT,
        max_pending_pushes=2,
        max_sessions_per_principal=SESSION_LIMIT,
    ),
    "principal": tenant_of,
}

#: Tools that push a request to the client (``ctx.input``), and what they need declared.
PUSHING: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "test_elicitation": ({"message": "Who are you?"}, ("elicitation",)),
    "test_sampling": ({"prompt": "2+2?"}, ("sampling",)),
    "test_elicitation_sep1034_defaults": ({}, ("elicitation",)),
    "test_elicitation_sep1330_enums": ({}, ("elicitation",)),
    "test_input_required_result_elicitation": ({}, ("elicitation",)),
    "test_input_required_result_sampling": ({}, ("sampling",)),
    "test_input_required_result_list_roots": ({}, ("roots",)),
    "test_input_required_result_multiple_inputs": ({}, ("elicitation", "sampling", "roots")),
    "test_input_required_result_multi_round": ({}, ("elicitation",)),
    "confirm_delete": ({"filename": "notes.txt"}, ("elicitation",)),
    "multi_input": ({}, ("elicitation",)),
}
_ASKING = {*PUSHING, *MRTR_TOOLS, "test_tool_with_task"}
#: The tools a "sessions" step calls: none that pushes (a push waits for its answer), nor
#: the one that closes its stream on purpose (this client does not reconnect).
QUIET_TOOLS = tuple(
    name for name in TOOL_NAMES if name not in _ASKING and name != "test_reconnection"
)

FULL_CAPS = {"elicitation": {}, "sampling": {}, "roots": {"listChanged": True}}
GONE = {"code": -32001, "message": "Session not found"}
NO_BODY = "no body"  # an answer with no JSON-RPC message in it (202, 405, a DELETE's 200)
STREAM = "stream"  # a GET stream that started
#: What a request on a live session may be refused with, on HTTP 200.
LIVE_CODES = frozenset({-32600, -32601, -32602, -32002, -32021, -32603, -32800})
SESSION_STATUSES = frozenset({200, 202, 400, 404, 405, 409, 503})
_ID = re.compile(r"[\x21-\x7e]{1,256}")
_VISIBLE = re.compile(rb"[\t\x20-\x7e]*")


@cache
def schemas(version: str) -> Schemas:
    return Schemas(load_document(version))


# ====================================================================== the model


@dataclass
class Open:
    """A session a scenario opened: its id, its principal, its version, and what it is now."""

    session_id: str
    tenant: str
    version: str
    alive: bool = True
    held: bool = False  # a GET stream holds it


@dataclass
class World:
    """The sessions of one scenario, by name ("a" is Alice's, "b" is Bob's), and those
    that a junk ``initialize`` opened on the way."""

    named: dict[str, Open] = field(default_factory=dict)
    extra: list[Open] = field(default_factory=list)
    #: The event ids of resumable streams the server gave, and the session of each.
    events: dict[str, str] = field(default_factory=dict)

    def find(self, session_id: str) -> Open | None:
        for opened in [*self.named.values(), *self.extra]:
            if opened.session_id == session_id:
                return opened
        return None

    def alive(self) -> list[Open]:
        return [o for o in [*self.named.values(), *self.extra] if o.alive]


DEFECTIVE = "defective"


def read_header(values: Sequence[bytes]) -> str | None:
    """A single-valued MCP header as the transport rules read it: None when absent, its
    value without surrounding blanks, or ``DEFECTIVE`` (repeated, or not visible ASCII)."""
    if not values:
        return None
    if len(values) > 1 or not _VISIBLE.fullmatch(values[0]):
        return DEFECTIVE
    return values[0].decode("ascii").strip(" \t")


def header_values(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    return [v for k, v in headers if k.lower() == name]


@dataclass(frozen=True)
class Verdict:
    """What one exchange deserves: the (status, code) pairs allowed (code None for a
    result, ``NO_BODY`` or ``STREAM`` for an answer without a response), and why.

    ``modern``: the 2026-07-28 rules decide (``strategies.check`` judges). ``opening``: an
    ``initialize`` that opens a session when it succeeds. ``version``: the session's (its
    schema checks what the server writes). ``names_header``: a refusal must name it.
    ``pushes``: the server may push requests on this exchange."""

    allowed: frozenset[tuple[int, int | str | None]]
    why: str
    modern: bool = False
    opening: bool = False
    version: str = LEGACY[0]
    names_header: str | None = None
    pushes: bool = False
    method: str = ""
    requested: Any = None  # an opening initialize's protocolVersion


MODERN_VERDICT = Verdict(frozenset(), "decided by the 2026-07-28 rules", modern=True)


def verdict(why: str, *pairs: tuple[int, int | str | None], **more: Any) -> Verdict:
    return Verdict(frozenset(pairs), why, **more)


def _is_response(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("jsonrpc") == "2.0"
        and value.get("method") is None
        and ("result" in value or "error" in value)
    )


def _good_response(value: dict[str, Any]) -> bool | None:
    """Whether a client's answer is well-formed (JSON-RPC 2.0, MCP: a result is an object);
    None where the rules leave it open (an error whose message is not a string)."""
    request_id = value.get("id")
    if not (type(request_id) is int or isinstance(request_id, str)):
        return False
    if ("result" in value) == ("error" in value):
        return False
    if "result" in value:
        return isinstance(value["result"], dict)
    error = value["error"]
    if not (isinstance(error, dict) and type(error.get("code")) is int and "message" in error):
        return False
    return True if isinstance(error["message"], str) else None


def kind_of(body: bytes) -> tuple[str, Envelope]:
    """``parse_error``, ``invalid``, ``request``, ``notification``, or ``response`` (a
    client's answer; ``response?`` where its well-formedness is left open)."""
    env = classify(body)
    if env.kind == "invalid" and _is_response(env.value):
        good = _good_response(env.value)
        return ("response" if good else "response?" if good is None else "invalid"), env
    return env.kind, env


def model_post(body: bytes, headers: Sequence[tuple[bytes, bytes]], world: World) -> Verdict:
    """What a POST deserves: parse first, then the session header, then the version
    header, then the body (an ``initialize`` request with neither header opens a
    session)."""
    kind, env = kind_of(body)
    if kind == "parse_error":
        return verdict("not strict JSON", (400, -32700))
    if kind == "invalid":
        return verdict("not a JSON-RPC message", (400, -32600))
    session = read_header(header_values(headers, b"mcp-session-id"))
    version = read_header(header_values(headers, b"mcp-protocol-version"))
    tenant = read_header(header_values(headers, b"mcp-tenant")) or "nobody"
    method = env.method if kind in ("request", "notification") else None
    answered = kind in ("response", "response?")
    if session == DEFECTIVE:
        return verdict(
            "a repeated or non-ASCII Mcp-Session-Id",
            (400, -32600),
            (400, -32020),
            names_header="mcp-session-id",
        )
    if session is not None and version == DEFECTIVE:
        return verdict(
            "a session's message with a repeated or non-ASCII MCP-Protocol-Version",
            (400, -32600),
            (400, -32020),
        )
    if session is None:
        opening = kind == "request" and method == "initialize"
        older = version in LEGACY or (version is None and opening)
        if not older:
            return MODERN_VERDICT
        if opening:
            requested = env.params.get("protocolVersion")
            return verdict(
                "an initialize",
                (200, None),
                (400, -32602),
                (503, -32603),
                opening=True,
                method="initialize",
                requested=requested,
            )
        return verdict("the older era without a session", (400, -32600), method=method or "")
    if version is not None and version not in LEGACY:
        return verdict(f"a session's message with version {version!r}", (400, -32600))
    opened = world.find(session)
    if opened is None or not opened.alive or opened.tenant != tenant or not _ID.fullmatch(session):
        return verdict("no live session of this principal", (404, -32001), method=method or "")
    if kind == "notification" or answered:
        if kind == "response?":
            return verdict("an answer with a non-string message", (202, NO_BODY), (400, -32600))
        return verdict("a session's notification or answer", (202, NO_BODY))
    assert method is not None
    if method == "initialize":
        return verdict("an initialize on a session", (200, -32600), version=opened.version)
    pairs = [(200, code) for code in LIVE_CODES]
    return verdict(
        "a request on a live session",
        (200, None),
        *pairs,
        version=opened.version,
        method=method,
        pushes=method in ("tools/call", "prompts/get", "resources/read"),  # may ask the client
    )


def model_exchange(method: str, headers: Sequence[tuple[bytes, bytes]], world: World) -> Verdict:
    """What a GET or DELETE deserves: 405 without a session header; 400 for a malformed
    session header, or a version header that is malformed or not served; else the
    session's."""
    values = header_values(headers, b"mcp-session-id")
    if not values:
        return verdict(f"{method} without a session", (405, NO_BODY))
    session = read_header(values)
    if session == DEFECTIVE:
        return verdict(
            "a repeated or non-ASCII Mcp-Session-Id",
            (400, -32600),
            (400, -32020),
            names_header="mcp-session-id",
        )
    version = read_header(header_values(headers, b"mcp-protocol-version"))
    if version == DEFECTIVE:
        return verdict(
            f"a session's {method} with a malformed version", (400, -32600), (400, -32020)
        )
    if version is not None and version not in LEGACY:  # MUST be 400, on every request
        return verdict(
            f"a session's {method} with version {version!r}", (400, -32600), (400, -32020)
        )
    tenant = read_header(header_values(headers, b"mcp-tenant")) or "nobody"
    assert session is not None
    opened = world.find(session)
    if opened is None or not opened.alive or opened.tenant != tenant or not _ID.fullmatch(session):
        return verdict("no live session of this principal", (404, -32001))
    if method == "DELETE":
        return verdict("the end of a live session", (200, NO_BODY), version=opened.version)
    resumed = header_values(headers, b"last-event-id")
    if resumed:  # the first is read; an id its session's streams do not hold is 400
        if world.events.get(resumed[0].decode("latin-1")) == opened.session_id:
            return verdict("the resumption of a stream", (200, STREAM), version=opened.version)
        return verdict("a Last-Event-ID not held", (400, -32600), version=opened.version)
    if opened.held:
        return verdict("a second GET stream", (409, -32600), version=opened.version)
    return verdict("the GET stream of a live session", (200, STREAM), version=opened.version)


# ====================================================================== the oracle


def judge(
    verdict_: Verdict,
    case: Case,
    answer: Answer,
    client: Client,
    records: Sequence[logging.LogRecord],
) -> list[str]:
    """Every way ``answer`` breaks the rules for ``case`` as ``verdict_`` says them."""
    if verdict_.modern:
        return check(case, answer, client, records)
    problems = [f"ASGI: {p}" for p in answer.protocol]
    if answer.timed_out:
        problems.append("no complete answer within the time limit (a hang)")
    elif not (answer.client_left and not answer.status):
        problems += _judge_answer(verdict_, case, answer)
    return problems + _check_logs(records)


def _judge_answer(verdict_: Verdict, case: Case, answer: Answer) -> list[str]:
    problems: list[str] = []
    status, body = answer.status, answer.body
    cut = answer.hung_up or (answer.client_left and not answer.complete)
    ctype = answer.header(b"content-type") or ""
    if status not in SESSION_STATUSES:
        problems.append(f"status {status} is not one a session's exchange may get")
    if not answer.complete and not cut:
        problems.append("the response never finished")
    length = answer.header(b"content-length")
    if length is not None and length != str(len(body)):
        problems.append(f"content-length {length} but the body has {len(body)} bytes")
    opened_id = answer.header(b"mcp-session-id")
    if status == 405:
        if answer.header(b"allow") != "POST" or ctype != "text/plain; charset=utf-8":
            problems.append("405 without 'Allow: POST' and a plain body")
        return problems + _allowed(verdict_, (405, NO_BODY))
    if ctype == "text/plain; charset=utf-8":
        if body:
            problems.append(f"a plain {status} with a body {body[:100]!r}")
        if opened_id is not None:
            problems.append("an Mcp-Session-Id on an answer that opened nothing")
        return problems + _allowed(verdict_, (status, NO_BODY))

    messages: list[Any] = []
    streamed = ctype.startswith("text/event-stream")
    if streamed:
        if status != 200:
            problems.append(f"an SSE stream with status {status}")
        if answer.header(b"cache-control") != "no-cache":
            problems.append("an SSE stream without 'Cache-Control: no-cache'")
        messages, found = _parse_sse(body, answer.complete, resumable=True)
        problems += found
    elif ctype == "application/json":
        try:
            messages = [json.loads(body)]
        except ValueError:
            problems.append(f"application/json body is not JSON: {body[:200]!r}")
    else:
        return [*problems, f"unexpected content-type {ctype!r} with status {status}"]

    kind, env = kind_of(case.body) if case.method == "POST" else ("exchange", Envelope("none"))
    pushed: set[str] = set()
    responses: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            problems.append(f"not a JSON-RPC 2.0 message: {str(message)[:200]}")
            continue
        if "method" in message:
            problems += _judge_outgoing(verdict_, message, pushed)
            last = index == len(messages) - 1 and not cut
            if "id" not in message and last and case.method == "POST":
                problems.append("a POST's stream that ends with a notification")
            continue
        responses.append(message)
    if case.method == "GET" and status == 200:
        if responses:
            problems.append(f"a GET stream carried a response: {responses[0]!r:.200}")
        if not streamed:
            problems.append("a GET answered 200 without a stream")
        return problems + _allowed(verdict_, (200, STREAM))
    if not cut and len(responses) != 1:
        problems.append(f"{len(responses)} responses, not exactly one")
    for response in responses:
        problems += _judge_response(verdict_, case, kind, env, status, response, opened_id)
    if not responses and cut:
        return problems
    code = _code_of(responses[0]) if responses else "none"
    return problems + _allowed(verdict_, (status, code))


def _code_of(response: dict[str, Any]) -> int | str | None:
    if "result" in response:
        return None
    error = response.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if type(code) is int else "malformed"


def _allowed(verdict_: Verdict, found: tuple[int, int | str | None]) -> list[str]:
    if found in verdict_.allowed:
        return []
    wanted = sorted(verdict_.allowed, key=str)
    return [f"expected one of {wanted} ({verdict_.why}), got {found}"]


_PUSHED = {
    "elicitation/create": "ElicitRequest",
    "sampling/createMessage": "CreateMessageRequest",
    "roots/list": "ListRootsRequest",
}


def _judge_outgoing(verdict_: Verdict, message: dict[str, Any], pushed: set[str]) -> list[str]:
    """A request the server pushed, or a notification it sent, on a session's stream."""
    document = schemas(verdict_.version)
    method = message["method"]
    if "id" in message:
        if not verdict_.pushes:
            return [f"a request pushed on an exchange that may not push: {message!r:.200}"]
        definition = _PUSHED.get(method)
        if definition is None:
            return [f"a pushed {method!r}, not a request a server may push"]
        if not isinstance(message["id"], str):
            return [f"a pushed request with the id {message['id']!r}"]
        pushed.add(message["id"])
        found = document.violations(definition, message)
        return (
            [f"pushed {method} breaks the {verdict_.version} schema: {found[0]}"] if found else []
        )
    definition = document.notification_definitions().get(method)
    if definition is None:
        return [f"a notification the {verdict_.version} client has no word for: {method!r}"]
    problems = []
    found = document.violations(definition, message)
    if found:
        problems.append(f"{method} breaks the {verdict_.version} schema: {found[0]}")
    if method == "notifications/cancelled":
        named = (message.get("params") or {}).get("requestId")
        if named not in pushed:
            problems.append(f"cancelled {named!r}, which was never pushed here")
    return problems


def _judge_response(
    verdict_: Verdict,
    case: Case,
    kind: str,
    env: Envelope,
    status: int,
    response: dict[str, Any],
    opened_id: str | None,
) -> list[str]:
    problems: list[str] = []
    # --- the id: the request's (or the answer's) when it could be read, else none
    expected = env.id if kind in ("request", "response", "response?", "invalid") else None
    if kind == "invalid" and isinstance(env.value, dict) and _is_response(env.value):
        expected = env.id if env.value.get("id") is not None else None
        if expected is not None and not (type(expected) is int or isinstance(expected, str)):
            expected = None
    if "id" in response and response["id"] is None:
        problems.append('a response with "id": null')
    if expected is None:
        if "id" in response:
            problems.append(f"an id {response['id']!r} the message did not readably carry")
    elif response.get("id") != expected or type(response.get("id")) is not type(expected):
        problems.append(f"id {response.get('id')!r} does not echo {expected!r}")
    if "result" in response:
        problems += _judge_result(verdict_, status, response["result"], opened_id)
        return problems
    if opened_id is not None:
        problems.append("an Mcp-Session-Id on an error")
    error = response.get("error")
    if not isinstance(error, dict):
        return [*problems, f"neither result nor error: {response!r:.200}"]
    code, text, data = error.get("code"), error.get("message"), error.get("data")
    if type(code) is not int or not isinstance(text, str):
        return [*problems, f"a malformed error object: {error!r:.200}"]
    request_text = case.body.decode("utf-8", "replace") + "".join(
        v.decode("latin-1") for _, v in case.headers
    )
    leaked = [m for m in _EXCEPTION_NAME.findall(text) if m not in request_text]
    if leaked or "\n  File " in text:
        problems.append(f"error message leaks Python internals {leaked}: {text[:300]!r}")
    if status == 404 and error != GONE:
        problems.append(f"a 404 that is not exactly {GONE}: {error!r:.200}")
    if code == -32001 and status != 404:
        problems.append(f"-32001 with HTTP {status}")
    if status in (503,) or (code == -32603 and isinstance(data, dict) and "limit" in data):
        if not (isinstance(data, dict) and data.get("retryable") is True and data.get("limit")):
            problems.append(f"a capacity refusal that is not retryable naming its limit: {data!r}")
    elif code == -32603 and not text.startswith("The client ") and not _inexpressible(text):
        problems.append(f"an internal error: {text!r:.300}")
    if status == 409 and not text.startswith("Conflict"):
        problems.append(f"a 409 that does not say Conflict: {text!r}")
    named = text.lower()
    if verdict_.names_header and not any(h in named for h in _named_headers(verdict_, case)):
        problems.append(f"a refusal that does not name {verdict_.names_header}: {text!r}")
    return problems


def _inexpressible(text: str) -> bool:
    """A tool asked a 2025-06-18 client for what only 2025-11-25 can say (an elicitation
    with a multi-select enum, say): refused, naming the version, as documented."""
    return text.startswith("This ") and "cannot be expressed in protocol 2025-06-18" in text


def _named_headers(verdict_: Verdict, case: Case) -> list[str]:
    """The headers a refusal may name: the one the verdict says, or the version header
    when it is malformed as well (either is the reason)."""
    found = [str(verdict_.names_header)]
    if read_header(header_values(case.headers, b"mcp-protocol-version")) == DEFECTIVE:
        found.append("mcp-protocol-version")
    return found


def _judge_result(verdict_: Verdict, status: int, result: Any, opened_id: str | None) -> list[str]:
    problems: list[str] = []
    if status != 200:
        problems.append(f"a result with status {status}")
    if not isinstance(result, dict):
        return [*problems, f"a result that is not an object: {result!r:.200}"]
    for key in ("resultType", "ttlMs", "cacheScope"):
        if key in result:
            problems.append(f"a 2026-07-28 key {key!r} in an older era's result")
    if "io.modelcontextprotocol/serverInfo" in (result.get("_meta") or {}):
        problems.append("a 2026-07-28 serverInfo stamp in an older era's result")
    if verdict_.opening:
        version = result.get("protocolVersion")
        wanted = verdict_.requested if verdict_.requested in LEGACY else LEGACY[0]
        if version != wanted:
            problems.append(f"negotiated {version!r} for {verdict_.requested!r}, not {wanted}")
        if opened_id is None or not _ID.fullmatch(opened_id):
            problems.append(f"an initialize result without a session id: {opened_id!r}")
        found = schemas(wanted).violations("InitializeResult", result)
        if found:
            problems.append(f"InitializeResult breaks the {wanted} schema: {found[0]}")
        return problems
    if opened_id is not None:
        problems.append("an Mcp-Session-Id on a result that opened nothing")
    document = schemas(verdict_.version)
    definition = document.request_definitions().get(verdict_.method, "")
    answer_def = definition.removesuffix("Request") + "Result"
    if answer_def in document.definitions:
        found = document.violations(answer_def, result)
        if found:
            problems.append(f"{answer_def} breaks the {verdict_.version} schema: {found[0]}")
    return problems


# ====================================================================== building cases

JSON_HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
]


@dataclass(frozen=True)
class Naming:
    """How a step names a session (resolved against the scenario's sessions when played).

    ``kind``: ``missing``, ``exact``, ``padded`` (blanks around it), ``repeated`` (twice),
    ``repeated-other`` (it and another), ``non-ascii``, ``control``, ``upper``,
    ``truncated``, ``extended``, ``unknown``, ``empty``, ``long``, ``junk`` (``junk`` bytes)."""

    kind: str = "exact"
    which: str = "a"
    junk: bytes = b""
    size: int = 300

    def values(self, world: World) -> list[bytes]:
        opened = world.named.get(self.which)
        sid = (opened.session_id if opened else secrets.token_urlsafe(24)).encode()
        kind = self.kind
        if kind == "missing":
            return []
        if kind == "exact":
            return [sid]
        if kind == "padded":
            return [b" " + sid + b"\t"]
        if kind == "repeated":
            return [sid, sid]
        if kind == "repeated-other":
            return [sid, secrets.token_urlsafe(24).encode()]
        if kind == "non-ascii":
            return [sid + "\u00e9".encode()]
        if kind == "control":
            return [sid[:5] + b"\x00" + sid[5:]]
        if kind == "upper":
            return [sid.upper() if sid.upper() != sid else sid.lower()]
        if kind == "truncated":
            return [sid[:-1]]
        if kind == "extended":
            return [sid + b"A"]
        if kind == "unknown":
            return [secrets.token_urlsafe(24).encode()]
        if kind == "empty":
            return [b""]
        if kind == "long":
            return [sid * (self.size // len(sid) + 1)]
        return [self.junk]


namings = st.builds(
    Naming,
    kind=weighted(
        (12, st.just("exact")),
        (2, st.just("missing")),
        (
            1,
            st.sampled_from(
                ["padded", "repeated", "repeated-other", "non-ascii", "control", "upper"]
            ),
        ),
        (1, st.sampled_from(["truncated", "extended", "unknown", "empty", "long", "junk"])),
    ),
    which=weighted((6, st.just("a")), (1, st.just("b"))),
    junk=st.binary(max_size=40) | st.text(max_size=20).map(lambda s: s.encode("utf-8")),
    size=st.sampled_from([256, 257, 1000, 8000]),
)

#: The version header a step sends: its session's (mostly), or another, or junk.
versions = weighted(
    (10, st.just("session")),
    (2, st.just("missing")),
    (1, st.sampled_from([*LEGACY, MODERN])),
    (1, st.sampled_from([" 2025-11-25 ", "2025-11-25\t", "2024-11-05", "2026-07-29", ""])),
    (1, st.sampled_from(["repeated", "non-ascii"])),
    (1, st.text(max_size=12)),
)


def version_values(choice: str, world: World, which: str) -> list[bytes]:
    opened = world.named.get(which)
    own = (opened.version if opened else LEGACY[0]).encode()
    if choice == "session":
        return [own]
    if choice == "missing":
        return []
    if choice == "repeated":
        return [own, own]
    if choice == "non-ascii":
        return [own + "\u00e9".encode()]
    return [choice.encode("utf-8")]


def headers_for(
    world: World, naming: Naming, version: str, tenant: str | None
) -> list[tuple[bytes, bytes]]:
    headers = list(JSON_HEADERS)
    headers += [(b"mcp-session-id", v) for v in naming.values(world)]
    headers += [(b"mcp-protocol-version", v) for v in version_values(version, world, naming.which)]
    if tenant is not None:
        headers.append((b"mcp-tenant", tenant.encode()))
    return headers


def session_case(
    world: World, label: str, body: bytes, headers: list[tuple[bytes, bytes]], method: str = "POST"
) -> Case:
    decided = (
        model_post(body, headers, world)
        if method == "POST"
        else model_exchange(method, headers, world)
    )
    return Case(body, headers, method, label=label, oracle=partial(judge, decided))


def verdict_of(case: Case) -> Verdict:
    oracle = case.oracle
    assert isinstance(oracle, partial)
    found: Verdict = oracle.args[0]
    return found


# ====================================================================== strategies: messages

#: What a "sessions" step asks for: the session's own methods, the routed ones, the ones
#: only 2026-07-28 has, an ``initialize`` on a session, and junk.
SESSION_METHODS = weighted(
    (3, st.sampled_from(["ping", "tools/list", "tools/call", "resources/read"])),
    (
        2,
        st.sampled_from(
            [
                "logging/setLevel",
                "resources/subscribe",
                "resources/unsubscribe",
                "prompts/list",
                "prompts/get",
                "resources/list",
                "resources/templates/list",
                "completion/complete",
            ]
        ),
    ),
    (1, st.sampled_from(["initialize", "server/discover", "subscriptions/listen", "tasks/get"])),
    (1, st.sampled_from(["tasks/list", "sampling/createMessage", "Ping", "tools/call "])),
    (1, st.text(max_size=12)),
)
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@cache  # a strategy is built (and validated) once, then reused
def session_params(method: str) -> st.SearchStrategy[Any]:
    if method == "tools/call":
        plausible = st.sampled_from(QUIET_TOOLS).flatmap(
            lambda name: st.fixed_dictionaries(
                {"name": st.just(name)}, optional={"arguments": _tool_arguments(name)}
            )
        )
        named = st.fixed_dictionaries({"name": st.text(max_size=8) | json_scalars})
        return weighted((6, plausible), (1, named), (1, json_objects), (1, json_values))
    if method == "logging/setLevel":
        level = weighted((4, st.sampled_from(LEVELS)), (1, st.text(max_size=8) | json_scalars))
        return weighted((5, st.fixed_dictionaries({"level": level})), (1, json_values))
    if method in ("resources/subscribe", "resources/unsubscribe"):
        return weighted((5, st.fixed_dictionaries({"uri": uris})), (1, json_values))
    if method == "prompts/get":
        name = st.sampled_from(PROMPT_NAMES) | st.text(max_size=6)
        args = st.dictionaries(
            st.sampled_from(["arg1", "arg2", "resourceUri"]), st.text(max_size=6)
        )
        plausible = st.fixed_dictionaries({"name": name}, optional={"arguments": args})
        return weighted((5, plausible), (1, json_values))
    if method == "initialize":
        return initialize_params()
    if method in ROUTED_OR_OWN:
        return _params_for(method)
    return weighted((4, st.just({})), (1, json_objects), (1, json_values))


ROUTED_OR_OWN = frozenset({*ROUTED, "ping", "tasks/list", "sampling/createMessage"})


@st.composite
def initialize_params(draw: st.DrawFn) -> Any:
    """An ``initialize``'s params: valid (any served or unserved version), or broken."""
    version = draw(
        weighted(
            (6, st.sampled_from(LEGACY)),
            (2, st.sampled_from([MODERN, "2024-11-05", "2025-03-26", "", "1.0"])),
            (1, json_scalars),
        )
    )
    capabilities = draw(
        weighted(
            (4, st.just(FULL_CAPS)),
            (2, st.just({})),
            (1, st.sampled_from([{"elicitation": {}}, {"sampling": {}}, {"roots": {}}])),
            (1, json_values),
        )
    )
    info = draw(weighted((6, st.just({"name": "fuzz", "version": "1"})), (1, json_values)))
    params: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": capabilities,
        "clientInfo": info,
    }
    fault = draw(weighted((8, st.just("none")), (1, st.sampled_from(["drop", "extra", "meta"]))))
    if fault == "drop":
        del params[draw(st.sampled_from(sorted(params)))]
    elif fault == "extra":
        params.update(draw(json_objects))
    elif fault == "meta":  # a 2026-07-28 client's _meta on an initialize
        params["_meta"] = draw(metas())
    if draw(one_in(12)):
        return draw(json_values)  # not even an object
    return params


def valid_initialize(version: str, caps: dict[str, Any], request_id: Any = 0) -> dict[str, Any]:
    params = {
        "protocolVersion": version,
        "capabilities": caps,
        "clientInfo": {"name": "fuzz", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


session_ids = weighted(
    (6, st.integers(-(2**53), 2**53)), (3, st.text(max_size=10)), (1, request_ids)
)


@st.composite
def session_requests(draw: st.DrawFn) -> dict[str, Any]:
    method = draw(SESSION_METHODS)
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(session_ids), "method": method}
    if not draw(one_in(8)):
        params = draw(session_params(method))
        if isinstance(params, dict) and draw(one_in(4)):  # a 2026-07-28 _meta on a session
            params = {**params, "_meta": draw(metas())}
        message["params"] = params
    return message


NOTIFICATIONS = weighted(
    (3, st.sampled_from(["notifications/initialized", "notifications/cancelled"])),
    (1, st.sampled_from(["notifications/roots/list_changed", "notifications/progress"])),
    (1, st.text(max_size=12)),
)


@st.composite
def session_notifications(draw: st.DrawFn) -> dict[str, Any]:
    method = draw(NOTIFICATIONS)
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if method == "notifications/cancelled":
        params = st.fixed_dictionaries(
            {"requestId": session_ids}, optional={"reason": st.text(max_size=10)}
        )
        message["params"] = draw(weighted((4, params), (1, json_values)))
    elif draw(one_in(3)):
        message["params"] = draw(json_objects | json_values)
    return message


push_ids = weighted(
    (
        3,
        st.builds(
            "presa-{}-{}".format,
            st.text("0123456789abcdef", min_size=1, max_size=16),
            st.integers(0, 99),
        ),
    ),
    (2, st.integers(-(2**63), 2**63) | st.text(max_size=10)),
    (1, request_ids),
)


@st.composite
def client_answers(draw: st.DrawFn) -> dict[str, Any]:
    """A client's answer to a request nobody pushed: well-formed mostly, else malformed
    (both result and error, neither, a result that is not an object, a broken error)."""
    message: dict[str, Any] = {"jsonrpc": "2.0"}
    if not draw(one_in(12)):
        message["id"] = draw(push_ids)
    shape = draw(weighted((4, st.just("result")), (2, st.just("error")), (1, st.just("broken"))))
    if shape == "result":
        message["result"] = draw(weighted((5, json_objects), (1, json_values)))
    elif shape == "error":
        error = st.fixed_dictionaries(
            {"code": st.integers(-(2**31), 2**31), "message": st.text(max_size=10)},
            optional={"data": json_values},
        )
        message["error"] = draw(weighted((5, error), (1, json_values)))
    else:
        broken = draw(st.sampled_from(["both", "jsonrpc", "error-message", "error-code"]))
        if broken == "both":
            message["result"], message["error"] = {}, {"code": 1, "message": "x"}
        elif broken == "jsonrpc":
            message["jsonrpc"], message["result"] = draw(st.sampled_from(["1.0", None])), {}
        elif broken == "error-message":
            message["error"] = {"code": 1, "message": draw(json_values)}
        else:
            message["error"] = {"code": draw(json_values), "message": "x"}
    return message


# ====================================================================== the "sessions" family


@dataclass(frozen=True)
class Step:
    """One step of a "sessions" scenario."""

    op: str  # post, get, resume, delete, held-get
    naming: Naming
    version: str
    tenant: str | None
    message: Any = None
    then: str = "hang-up"  # a held GET's end: hang-up, delete (the session), or trigger


class SessionScenario(Scenario):
    """Open Alice's session (and maybe Bob's), play the steps, end whatever is open."""

    def __init__(self, steps: list[Step], version: str, caps: dict[str, Any], with_b: bool):
        super().__init__(steps, "sessions")
        self.version = version
        self.caps = caps
        self.with_b = with_b

    def __repr__(self) -> str:
        steps = "\n".join(f"  {s!r}" for s in self.steps)
        return f"SessionScenario(version={self.version!r}, b={self.with_b}, steps=\n{steps})"

    async def play(self, play: Play) -> None:
        world = World()
        try:
            await open_session(play, world, "a", "alice", self.version, self.caps)
            if self.with_b:
                await open_session(play, world, "b", "bob", LEGACY[1], FULL_CAPS)
            for step in self.steps:
                await play_step(play, world, step)
            await end_sessions(play, world)
        finally:
            await forget(play, world)


async def open_session(
    play: Play, world: World, name: str, tenant: str, version: str, caps: dict[str, Any]
) -> Open | None:
    body = json.dumps(valid_initialize(version, caps)).encode()
    headers = [*JSON_HEADERS, (b"mcp-tenant", tenant.encode())]
    case = session_case(world, f"open/{name}", body, headers)
    answer, response = await play.run(case)
    session_id = answer.header(b"mcp-session-id")
    if answer.status != 200 or session_id is None or not response or "result" not in response:
        return None
    opened = world.named[name] = Open(session_id, tenant, response["result"]["protocolVersion"])
    initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    headers = headers_for(world, Naming("exact", name), "session", tenant)
    await play.run(session_case(world, "initialized", initialized, headers))
    return opened


async def end_sessions(play: Play, world: World) -> None:
    """DELETE every session still open (each must end: 200)."""
    for opened in world.alive():
        headers = [
            *JSON_HEADERS,
            (b"mcp-session-id", opened.session_id.encode()),
            (b"mcp-tenant", opened.tenant.encode()),
        ]
        await play.run(session_case(world, "end", b"", headers, "DELETE"))
        opened.alive = False


async def forget(play: Play, world: World) -> None:
    """After a failure: end what is still open, judging nothing (the next example starts
    from a server that holds none of this one's sessions)."""
    for opened in world.alive():
        headers = [
            *JSON_HEADERS,
            (b"mcp-session-id", opened.session_id.encode()),
            (b"mcp-tenant", opened.tenant.encode()),
        ]
        await play.unchecked(Case(b"", headers, "DELETE", label="forget"))
        opened.alive = False


async def play_step(play: Play, world: World, step: Step) -> None:
    headers = headers_for(world, step.naming, step.version, step.tenant)
    if step.op == "post":
        body = to_json(step.message, ascii_only=False).encode("utf-8", "surrogatepass")
        case = session_case(world, f"post/{step.naming.kind}", body, headers)
        answer, response = await play.run(case)
        record_events(world, headers, answer)
        opened_id = answer.header(b"mcp-session-id")
        if verdict_of(case).opening and opened_id and response and "result" in response:
            version = response["result"].get("protocolVersion", LEGACY[0])
            world.extra.append(Open(opened_id, step.tenant or "nobody", version))
        return
    if step.op == "delete":
        case = session_case(world, f"delete/{step.naming.kind}", b"", headers, "DELETE")
        answer, _ = await play.run(case)
        if answer.status == 200:  # ended (rightly or not: the oracle judged that already)
            target = read_header(header_values(headers, b"mcp-session-id"))
            found = world.find(target or "")
            if found is not None:
                found.alive = False
        return
    if step.op == "resume":
        opened = world.named.get("a")
        if step.message[0] != "junk" and opened is not None and opened.alive:
            # a call of Alice's first: on 2025-11-25 its stream is resumable
            own = [
                *JSON_HEADERS,
                (b"mcp-session-id", opened.session_id.encode()),
                (b"mcp-tenant", opened.tenant.encode()),
            ]
            answer, _ = await play.run(session_case(world, "resumable-call", SIMPLE_CALL, own))
            record_events(world, own, answer)
        headers.append((b"last-event-id", last_event_id(world, step.message)))
        case = session_case(world, f"resume/{step.message[0]}", b"", headers, "GET")
        case.tap = Tap(until=lambda messages: True)
        await play.run(case)
        return
    if step.op == "get":
        case = session_case(world, f"get/{step.naming.kind}", b"", headers, "GET")
        case.tap = Tap(until=lambda messages: True)  # hang up once the stream has started
        await play.run(case)
        return
    await held_get(play, world, step, headers)


async def held_get(
    play: Play, world: World, step: Step, headers: list[tuple[bytes, bytes]]
) -> None:
    """Hold the session's GET stream; a second GET meanwhile is a conflict (409); then the
    client hangs up, or the session is deleted (and the stream ends by itself), or a tool
    changes the tool list (and the stream must carry the news before the client goes)."""
    opened = world.named.get("a")
    if opened is None:  # Alice's session did not open (judged already)
        return
    own = [
        *JSON_HEADERS,
        (b"mcp-session-id", opened.session_id.encode()),
        (b"mcp-tenant", opened.tenant.encode()),
    ]
    case = session_case(world, "held-get", b"", own, "GET")
    listening = trio.Event()  # the stream started, or the exchange is over
    over = trio.Event()
    heard = trio.Event()
    triggered = False

    def started(messages: list[Any]) -> bool:
        listening.set()
        if any(isinstance(m, dict) and m.get("method") == LIST_CHANGED for m in messages):
            heard.set()
        return False  # stay on

    def news(answer: Answer, response: dict[str, Any] | None) -> list[str]:
        if triggered and not heard.is_set():
            return ["the GET stream never carried the tool list change"]
        return []

    case.tap = tap = Tap(until=started)

    async def hold() -> None:
        await play.run(case, news)
        over.set()
        listening.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold)
        await listening.wait()
        opened.held = not over.is_set() and opened.alive
        second = session_case(world, "second-get", b"", headers, "GET")
        second.tap = Tap(until=lambda messages: True)
        await play.run(second)
        if step.then == "delete" and opened.held:
            await play.run(session_case(world, "delete-held", b"", own, "DELETE"))
            opened.alive = False
        else:
            if step.then == "trigger" and opened.held:
                triggered = True
                await play.run(session_case(world, "trigger", TRIGGER, own))
                with trio.move_on_after(5):
                    await heard.wait()
            tap.stop.set()
    opened.held = False


SIMPLE_CALL = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "resumable",
        "method": "tools/call",
        "params": {"name": "test_simple_text", "arguments": {}},
    }
).encode()


def record_events(world: World, headers: Sequence[tuple[bytes, bytes]], answer: Answer) -> None:
    """Note the event ids of a session's resumable stream (its own, once given)."""
    named = read_header(header_values(headers, b"mcp-session-id"))
    if named in (None, DEFECTIVE) or answer.status != 200:
        return
    for line in answer.body.split(b"\n"):
        if line.startswith(b"id: "):
            world.events[line[4:].decode("ascii")] = str(named).strip(" \t")


def last_event_id(world: World, choice: tuple[str, int, bytes]) -> bytes:
    """A ``Last-Event-ID`` for a resume step: one the server gave (any session's), one past
    a stream's end, a well-formed one never given, or junk."""
    kind, salt, junk = choice
    seen = sorted(world.events)
    if kind == "seen" and seen:
        return seen[salt % len(seen)].encode()
    if kind == "past-end" and seen:
        stream = seen[salt % len(seen)].rsplit("_", 1)[0]
        return f"{stream}_{10_000 + salt}".encode()
    if kind == "forged":
        return (secrets.token_urlsafe(16) + f"_{salt % 5}").encode()
    return junk


LIST_CHANGED = "notifications/tools/list_changed"
TRIGGER = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "trigger",
        "method": "tools/call",
        "params": {"name": "test_trigger_tool_change", "arguments": {}},
    }
).encode()


@st.composite
def session_steps(draw: st.DrawFn) -> Step:
    op = draw(
        weighted(
            (4, st.just("request")),
            (1, st.just("initialize")),
            (2, st.just("notification")),
            (2, st.just("answer")),
            (1, st.just("get")),
            (1, st.just("delete")),
            (1, st.just("held-get")),
            (2, st.just("resume")),
        )
    )
    naming = draw(namings)
    version = draw(versions)
    tenant = draw(weighted((8, st.just("alice")), (1, st.sampled_from([*TENANTS, None]))))
    if naming.which == "b" and tenant == "alice" and draw(st.booleans()):
        tenant = "bob"  # Bob's session used by Bob, as often as by Alice
    if op == "request":
        return Step("post", naming, version, tenant, draw(session_requests()))
    if op == "initialize":
        # mostly without a session header (it opens one), with any version header: none
        # (the older era's opening), an older one, 2026-07-28's, junk
        if draw(st.booleans()):
            naming = Naming("missing")
        version = draw(weighted((3, st.just("missing")), (3, versions), (2, st.just(MODERN))))
        message = {"jsonrpc": "2.0", "id": draw(session_ids), "method": "initialize"}
        message["params"] = draw(initialize_params())
        return Step("post", naming, version, tenant, message)
    if op == "notification":
        return Step("post", naming, version, tenant, draw(session_notifications()))
    if op == "answer":
        return Step("post", naming, version, tenant, draw(client_answers()))
    if op == "resume":
        kind = draw(weighted((4, st.just("seen")), (1, st.sampled_from(["past-end", "forged"])),
                             (1, st.just("junk"))))  # fmt: skip
        salt = draw(st.integers(0, 1000))
        junk = draw(st.binary(max_size=40) | st.sampled_from([b"", b"_0", b"x_1", b" " * 3]))
        return Step("resume", naming, version, tenant, (kind, salt, junk))
    if op == "held-get":
        then = draw(st.sampled_from(["hang-up", "delete", "trigger"]))
        return Step("held-get", naming, version, tenant, then=then)
    return Step(op, naming, version, tenant)


@st.composite
def session_scenarios(draw: st.DrawFn) -> Scenario:
    """Family "sessions": one or two sessions and up to six steps against them."""
    version = draw(st.sampled_from(LEGACY))
    caps = draw(st.sampled_from([FULL_CAPS, {}, {"elicitation": {}}]))
    steps = draw(st.lists(session_steps(), min_size=1, max_size=6))
    return SessionScenario(steps, version, caps, draw(one_in(3)))


# ====================================================================== the "pushes" family

PLANS = weighted(
    (4, st.just("answer")),
    (1, st.sampled_from(["invalid", "error", "twice", "unknown-first", "cancel", "leave"])),
    (1, st.sampled_from(["silent", "foreign", "deleted"])),
)
FORGED = "FORGED-BY-ANOTHER-SESSION"


def good_answer(method: str, salt: int) -> dict[str, Any]:
    if method == "elicitation/create":
        return [
            {"action": "decline"},
            {"action": "cancel"},
            {"action": "accept", "content": {"name": "Ada", "username": "ada", "confirm": True}},
        ][salt % 3]
    if method == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}
    return {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}


def bad_answer(method: str, salt: int) -> Any:
    if method == "elicitation/create":
        return [{}, {"action": "maybe"}, {"action": "accept", "content": {"x": [1]}}][salt % 3]
    if method == "sampling/createMessage":
        return [{}, {"role": "robot", "content": {"type": "text", "text": "x"}, "model": "m"}][
            salt % 2
        ]
    return [{}, {"roots": [{"name": "no uri"}]}, {"roots": "all"}][salt % 3]


def forged_answer(method: str) -> dict[str, Any]:
    if method == "elicitation/create":
        return {"action": "accept", "content": {"name": FORGED}}
    if method == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": FORGED}, "model": "m"}
    return {"roots": [{"uri": f"file:///{FORGED}"}]}


@dataclass
class Timing:
    """When each push of a call reached the client, and when its answer (or the call's
    cancellation) had been delivered: an answer delivered within ``PUSH_TIMEOUT`` of its
    push's arrival beats the server's deadline, which starts after the push is written."""

    arrived: dict[str, float] = field(default_factory=dict)
    posted: dict[str, float] = field(default_factory=dict)

    def may_time_out(self) -> bool:
        return any(
            push_id not in self.posted or self.posted[push_id] - at >= PUSH_TIMEOUT
            for push_id, at in self.arrived.items()
        )


@dataclass(frozen=True)
class PushCall:
    tool: str
    plan: str
    salt: int
    request_id: int


class PushScenario(Scenario):
    """Alice's session calls tools that push requests; each push is answered as its call's
    plan says; Mallory's session is there for the forged answers."""

    def __init__(self, calls: list[PushCall], version: str, caps: dict[str, Any]):
        super().__init__(list(calls), "pushes")
        self.version = version
        self.caps = caps

    def __repr__(self) -> str:
        return f"PushScenario(version={self.version!r}, caps={self.caps!r}, calls={self.steps!r})"

    async def play(self, play: Play) -> None:
        world = World()
        try:
            alice = await open_session(play, world, "a", "alice", self.version, self.caps)
            mallory = await open_session(play, world, "b", "mallory", LEGACY[0], FULL_CAPS)
            if alice is None or mallory is None:
                return
            async with trio.open_nursery() as nursery:
                for call in self.steps:
                    nursery.start_soon(self._call, play, world, call)
            await end_sessions(play, world)
        finally:
            await forget(play, world)

    async def _call(self, play: Play, world: World, call: PushCall) -> None:
        arguments, _ = PUSHING[call.tool]
        message = {
            "jsonrpc": "2.0",
            "id": call.request_id,
            "method": "tools/call",
            "params": {"name": call.tool, "arguments": arguments},
        }
        headers = headers_for(world, Naming("exact", "a"), "session", "alice")
        case = session_case(world, f"push/{call.plan}", json.dumps(message).encode(), headers)
        arrived, arrivals = trio.open_memory_channel[dict[str, Any]](64)
        leave = call.plan == "leave"

        def watch(messages: list[Any]) -> bool:
            for pushed in messages:
                asked = isinstance(pushed, dict) and "method" in pushed and "id" in pushed
                if asked and pushed["id"] not in timing.arrived:
                    timing.arrived[pushed["id"]] = trio.current_time()
                    arrived.send_nowait(pushed)
                    if leave:
                        return True  # the client goes away once asked
            return False

        case.tap = Tap(until=watch)
        timing = Timing()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._answer, play, world, call, arrivals, timing)
            await play.run(case, partial(self._outcome, call, timing))
            nursery.cancel_scope.cancel()

    async def _answer(
        self,
        play: Play,
        world: World,
        call: PushCall,
        arrivals: trio.MemoryReceiveChannel[dict[str, Any]],
        timing: Timing,
    ) -> None:
        """Answer each push as the plan says (the first one; the later ones well)."""
        first = True
        async for pushed in arrivals:
            method, push_id = pushed["method"], pushed["id"]
            plan = call.plan if first else "answer"
            first = False
            own = headers_for(world, Naming("exact", "a"), "session", "alice")

            async def send(
                body: dict[str, Any],
                headers: list[tuple[bytes, bytes]] = own,
                label: str = "answer",
                push_id: str = push_id,
            ) -> None:
                case = session_case(world, f"push/{label}", json.dumps(body).encode(), headers)
                await play.run(case)
                if label in ("answer", "cancel"):  # delivered by now, if ever
                    timing.posted.setdefault(push_id, trio.current_time())

            good = {"jsonrpc": "2.0", "id": push_id, "result": good_answer(method, call.salt)}
            if plan in ("answer", "twice", "unknown-first"):
                if plan == "unknown-first":
                    await send({**good, "id": f"{push_id}x"}, label="unknown-id")
                await send(good)
                if plan == "twice":
                    await send(good, label="again")
            elif plan == "invalid":
                await send({**good, "result": bad_answer(method, call.salt)})
            elif plan == "error":
                error = {"code": -1, "message": "no, thanks"}
                await send({"jsonrpc": "2.0", "id": push_id, "error": error})
            elif plan == "cancel":
                params = {"requestId": call.request_id, "reason": "changed my mind"}
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
                await send(cancel, label="cancel")
            elif plan == "foreign":
                forged = {"jsonrpc": "2.0", "id": push_id, "result": forged_answer(method)}
                mallorys = headers_for(world, Naming("exact", "b"), "session", "mallory")
                await send(forged, mallorys, "forged")  # Mallory's own session: 202, dropped
                as_alice = headers_for(world, Naming("exact", "a"), "session", "mallory")
                await send(forged, as_alice, "forged-as")  # Alice's id, Mallory's name: 404
            elif plan == "deleted":
                alice = world.named["a"]
                ending = [
                    *JSON_HEADERS,
                    (b"mcp-session-id", alice.session_id.encode()),
                    (b"mcp-tenant", b"alice"),
                ]
                if alice.alive:
                    await play.run(session_case(world, "push/delete", b"", ending, "DELETE"))
                    alice.alive = False
                await send(good, label="late")  # the session is gone: 404
            # "silent" and "leave": no answer at all

    def _outcome(
        self,
        call: PushCall,
        timing: Timing,
        answer: Answer,
        response: dict[str, Any] | None,
    ) -> list[str]:
        """What the call's final answer may be, given what its pushes were answered."""
        if response is None:
            return [] if answer.hung_up or answer.client_left else ["no final response"]
        _, needs = PUSHING[call.tool]
        undeclared = any(cap not in self.caps for cap in needs)
        error = response.get("error") if isinstance(response.get("error"), dict) else None
        text = str((error or {}).get("message", ""))
        data = (error or {}).get("data")
        code = (error or {}).get("code")
        if "result" in response:
            outcome = "result"
        elif code == -32021:
            outcome = "undeclared"
        elif (
            code == -32603 and isinstance(data, dict) and data.get("limit") == "max_pending_pushes"
        ):
            outcome = "full"
        elif code == -32603 and text.startswith("The client did not answer"):
            outcome = "timeout"
        elif code == -32603 and text.startswith("The client answered"):
            outcome = "error"
        elif code == -32602 and text.startswith("The client's answer to"):
            outcome = "invalid"
        elif code == -32800:
            outcome = "cancel"
        elif code == -32603 and self.version == "2025-06-18" and _inexpressible(text):
            outcome = "inexpressible"
        elif code == -32001 and answer.status == 404:
            outcome = "gone"  # deleted before the call began (another call's plan)
        else:
            outcome = f"unexpected {code}: {text[:200]}"
        problems: list[str] = []
        if FORGED.encode() in answer.body:
            problems.append("a forged answer from another session reached the call")
        if outcome == "inexpressible":
            return problems
        if outcome == "undeclared":
            return problems if undeclared else [*problems, "-32021 for declared capabilities"]
        if undeclared and outcome not in ("full",):
            problems.append(f"{outcome} for a tool needing {needs}, undeclared")
        if outcome == "full":
            if len(self.steps) < 3:
                problems.append("max_pending_pushes refused with fewer than 3 calls")
            return problems
        if outcome == "timeout":
            if not timing.may_time_out():
                problems.append("'did not answer' though every push was answered in time")
            if b"notifications/cancelled" not in answer.body:
                problems.append("a push timed out without telling the client")
            return problems
        expected = {
            "answer": "result",
            "twice": "result",
            "unknown-first": "result",
            "invalid": "invalid",
            "error": "error",
            "cancel": "cancel",
        }.get(call.plan)
        if outcome == "gone" and self._someone_deletes():
            return problems
        if outcome != expected:
            problems.append(f"plan {call.plan} ended with {outcome}")
        return problems

    def _someone_deletes(self) -> bool:
        return any(step.plan == "deleted" for step in self.steps)


@st.composite
def push_scenarios(draw: st.DrawFn) -> Scenario:
    """Family "pushes": one to three calls of pushing tools on one session, at once."""
    version = draw(st.sampled_from(LEGACY))
    caps = draw(
        weighted(
            (6, st.just(FULL_CAPS)),
            (1, st.sampled_from([{}, {"elicitation": {}}, {"sampling": {}, "roots": {}}])),
        )
    )
    count = draw(weighted((3, st.just(1)), (2, st.just(2)), (1, st.just(3))))
    calls = []
    for n in range(count):
        plan = draw(PLANS)
        calls.append(
            PushCall(draw(st.sampled_from(sorted(PUSHING))), plan, draw(st.integers(0, 5)), n)
        )
    if any(call.plan == "deleted" for call in calls):
        calls = [next(call for call in calls if call.plan == "deleted")]  # it ends the session
    return PushScenario(calls, version, caps)
