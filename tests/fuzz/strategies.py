"""Fuzzing the Streamable HTTP surface: Hypothesis strategies, one raw exchange, the oracle.

In the h11 tradition: feed the ASGI app anything (methods, paths, Host/Origin, MCP routing
headers, arbitrary bytes, arbitrary JSON, JSON-RPC-shaped messages, MRTR retries, task
lifecycles) in process, and judge every answer by what the wire rules say it must be. The
pieces are shared by ``tests/fuzz/test_http_fuzz.py`` (a small profile) and
``bench/fuzz.py`` (the by-hand 100k run):

- strategies draw ``Case`` values (one HTTP exchange) or ``Scenario`` values (several
  exchanges whose later steps use what the server answered: a ``requestState``, a ``taskId``);
- ``exchange`` plays one case against the app (no sockets, bounded in time) and hangs up on a
  ``subscriptions/listen`` stream once it is acknowledged (on any stream, given a ``Tap``);
- ``check`` is the oracle: every problem it finds with one answer, as sentences (a case
  may bring its own: the older era's, in ``sessions.py``);
- ``Harness`` runs a family of scenarios inside one run of a fresh fixture server, drawing
  examples with Hypothesis in a worker thread and playing them on the trio loop, and keeps
  the figures (statuses, codes, failures, logged tracebacks, every 500 with its input);
  after each scenario it checks that nothing is held (``Harness.settled``).

The older era's session families ("sessions", "pushes") live in ``sessions.py``.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache, cached_property, partial
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from fixtures.conformance import URI_PATTERN, build_server
from presa_trio import Timeouts, Validation
from presa_trio.testing import Client, SchemaViolationError

PROTOCOL_VERSION = "2026-07-28"
ENDPOINT = "/mcp"
MAX_BODY = 4 * 1024 * 1024  # AsgiApp's default ``max_body``
MAX_DEPTH = 128  # the nesting limit of the wire (the message object is level 1)
SLOW_BODY_TIMEOUT = 0.01  # the body timeout of the "slowbody" family's app
TASKS = "io.modelcontextprotocol/tasks"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

#: Every status the HTTP surface may answer.
ALLOWED_STATUSES = frozenset({200, 202, 400, 403, 404, 405, 408, 413, 500, 503})
#: The statuses a JSON error response may carry, by JSON-RPC code (wire §12.1).
STATUS_OF_CODE: dict[int, frozenset[int]] = {
    -32700: frozenset({400}),
    -32600: frozenset({400, 403, 408, 413}),
    -32601: frozenset({404}),
    -32602: frozenset({400}),
    -32020: frozenset({400}),
    -32021: frozenset({400}),
    -32022: frozenset({400}),
    -32603: frozenset({500, 503}),
}
#: Codes an admitted, well-formed request may be answered with.
REQUEST_CODES = frozenset({-32601, -32602, -32020, -32021, -32022, -32603})

# The fixture's catalogue, read once from a server that is never run.
_CATALOGUE = build_server(validation=Validation(outbound=False))
TOOL_NAMES: tuple[str, ...] = tuple(sorted(_CATALOGUE.registry.tools))
PROMPT_NAMES: tuple[str, ...] = tuple(sorted(_CATALOGUE.registry.prompts))
RESOURCE_URIS: tuple[str, ...] = tuple(sorted(_CATALOGUE.registry.resources))
ROUTED: tuple[str, ...] = tuple(sorted(_CATALOGUE.dispatcher.routes))
NAME_PARAM: dict[str, str] = {
    name: route.name_param
    for name, route in _CATALOGUE.dispatcher.routes.items()
    if route.name_param is not None
}
SCHEMAS = _CATALOGUE.schemas
MRTR_TOOLS = tuple(n for n in TOOL_NAMES if n.startswith("test_input_required_result_"))
TASK_TOOLS = ("slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input")
REQUIRED_PROMPT_ARGS = {
    name: [a["name"] for a in prompt.arguments if a.get("required")]
    for name, prompt in _CATALOGUE.registry.prompts.items()
}
OTHER_METHODS = (
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "tasks/list",
    "sampling/createMessage",
    "notifications/initialized",
    "notifications/cancelled",
    "Tools/Call",
    "tools/call ",
    "",
)


# ====================================================================== raw JSON text


@dataclass(frozen=True)
class Raw:
    """JSON text put into a body verbatim (``NaN``, ``1e400``, a lone ``\\ud800``, ...)."""

    text: str


@dataclass(frozen=True)
class Pairs:
    """A JSON object written key by key, in order, duplicates allowed."""

    items: tuple[tuple[str, Any], ...]


def to_json(value: Any, *, ascii_only: bool = True) -> str:
    """JSON text of ``value``, where ``Raw`` and ``Pairs`` say exactly what to write."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Pairs | dict):
        items = value.items if isinstance(value, Pairs) else tuple(value.items())
        inner = ",".join(
            json.dumps(k, ensure_ascii=ascii_only) + ":" + to_json(v, ascii_only=ascii_only)
            for k, v in items
        )
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ",".join(to_json(v, ascii_only=ascii_only) for v in value) + "]"
    return json.dumps(value, ensure_ascii=ascii_only)


# ====================================================================== cases


@dataclass(frozen=True)
class Expect:
    """What a case built to be served must get: statuses, and codes (None: a result)."""

    statuses: frozenset[int]
    codes: frozenset[int | None]
    why: str


def _first_event(messages: list[Any]) -> bool:
    return bool(messages)


@dataclass
class Tap:
    """How long to stay on a listen stream: until ``until(messages so far)`` holds (by
    default: the acknowledgement is in), or ``stop`` is set. ``first`` is set when the first
    event arrives, ``done`` when ``until`` held."""

    until: Callable[[list[Any]], bool] = _first_event
    first: trio.Event = field(default_factory=trio.Event)
    done: trio.Event = field(default_factory=trio.Event)
    stop: trio.Event = field(default_factory=trio.Event)


#: An oracle of its own for a case: ``(case, answer, client, log records) -> problems``.
Oracle = Callable[["Case", "Answer", Client, Sequence[logging.LogRecord]], list[str]]


@dataclass(repr=False)
class Case:
    """One HTTP exchange to play: the request, and what admission it deserves.

    ``admission`` is what its Host/Origin headers deserve: ``allowed``, ``refused`` or
    ``unknown`` (the fuzzer does not decide). ``cuts`` splits the body into ASGI chunks
    (a repeated cut makes an empty one); with ``leave_after`` the client goes away after
    sending that many chunks, without waiting for the answer.
    """

    body: bytes
    headers: list[tuple[bytes, bytes]]
    method: str = "POST"
    path: str = ENDPOINT
    admission: str = "allowed"
    cuts: tuple[int, ...] = ()
    expect: Expect | None = None
    label: str = ""
    leave_after: int | None = None  # the client disconnects after this many body chunks
    stall_after: int | None = None  # the client sends this many chunks, then nothing
    tap: Tap | None = None  # for a listen stream (or any stream given one): when to hang up
    #: Judges the answer instead of ``check`` (the older era's exchanges: see sessions.py).
    oracle: Oracle | None = None

    @cached_property
    def envelope(self) -> Envelope:
        return classify(self.body)

    @property
    def listen(self) -> bool:
        return self.envelope.kind == "request" and self.envelope.method == "subscriptions/listen"

    def __repr__(self) -> str:
        return f"Case<{self.describe()}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """What Hypothesis prints for a falsifying example (never a 4 MiB body)."""
        printer.text(repr(self))

    def describe(self) -> str:
        body = self.body if len(self.body) <= 2000 else self.body[:2000] + b"...(truncated)"
        lines = [
            f"{self.method} {self.path!r} [{self.label}] admission={self.admission}",
            *(f"  {k.decode('latin-1')}: {v!r}" for k, v in self.headers),
            f"  body ({len(self.body)} bytes, cuts {list(self.cuts)}, leave_after "
            f"{self.leave_after}): {body!r}",
        ]
        return "\n".join(lines)


# ====================================================================== the independent envelope


@dataclass(frozen=True)
class Envelope:
    """What the request body is by the wire rules (decided here, not by the server).

    ``kind``: ``parse_error`` (not strict JSON: not UTF-8, ``NaN``, a lone surrogate, nested
    deeper than 128), ``invalid`` (JSON but not a request or notification), ``notification``
    or ``request``. ``id`` is the readable request id (an int or a str) or None.
    """

    kind: str
    value: Any = None
    id: int | str | None = None
    has_id: bool = False

    @property
    def method(self) -> str | None:
        if isinstance(self.value, dict) and isinstance(self.value.get("method"), str):
            return str(self.value["method"])
        return None

    @property
    def params(self) -> dict[str, Any]:
        params = self.value.get("params") if isinstance(self.value, dict) else None
        return params if isinstance(params, dict) else {}

    @property
    def meta(self) -> dict[str, Any]:
        meta = self.params.get("_meta")
        return meta if isinstance(meta, dict) else {}

    @property
    def capabilities(self) -> dict[str, Any]:
        caps = self.meta.get(META_CAPS)
        return caps if isinstance(caps, dict) else {}


class _NotJson(ValueError):
    pass


def _reject(constant: str) -> None:
    raise _NotJson(constant)


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((child, level + 1) for child in _children(node))
    return deepest


def _children(node: dict[str, Any] | list[Any]) -> Iterator[Any]:
    if isinstance(node, dict):
        yield from node.values()
    else:
        yield from node


def _has_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if any(0xD800 <= ord(c) <= 0xDFFF for c in node):
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _double(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise ValueError("beyond a double")
    return number


def strict_json(body: bytes) -> tuple[bool, Any]:
    """``(True, value)`` for a body that is strict JSON (RFC 8259 and I-JSON), else False.
    I-JSON (RFC 7493 §2.2): a number must fit an IEEE 754 double; ``1e400`` does not."""
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_reject, parse_float=_double)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False, None
    if _depth(value) > MAX_DEPTH or _has_surrogate(value):
        return False, None
    return True, value


def classify(body: bytes) -> Envelope:
    ok, value = strict_json(body)
    if not ok:
        return Envelope("parse_error")
    if not isinstance(value, dict):
        return Envelope("invalid", value)
    raw_id = value.get("id")
    readable = raw_id if (type(raw_id) is int or isinstance(raw_id, str)) else None
    has_id = "id" in value
    method = value.get("method")
    if value.get("jsonrpc") != "2.0" or not isinstance(method, str) or not method:
        return Envelope("invalid", value, readable, has_id)
    if not has_id:
        return Envelope("notification", value)
    if readable is None:
        return Envelope("invalid", value, None, has_id)
    return Envelope("request", value, readable, has_id)


# ====================================================================== one exchange


@dataclass
class Answer:
    status: int = 0
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    complete: bool = False  # the server sent its last body chunk
    hung_up: bool = False  # we disconnected (a listen stream, once acknowledged)
    client_left: bool = False  # the case's client went away before the response ended
    timed_out: bool = False
    protocol: list[str] = field(default_factory=list)  # ASGI misuse by the app
    elapsed: float = 0.0

    def header(self, name: bytes) -> str | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value.decode("latin-1")
        return None


def _scope(case: Case) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": case.method,
        "scheme": "http",
        "path": case.path,
        "raw_path": case.path.encode("utf-8", "backslashreplace"),
        "query_string": b"",
        "root_path": "",
        "headers": list(case.headers),
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def _chunks(body: bytes, cuts: Sequence[int]) -> list[dict[str, Any]]:
    if not body:
        return [{"type": "http.request", "body": b"", "more_body": False}]
    points = sorted(c for c in cuts if 0 <= c <= len(body))
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    return [
        {"type": "http.request", "body": piece, "more_body": i < len(pieces) - 1}
        for i, piece in enumerate(pieces)
    ]


async def exchange(app: Any, case: Case, *, limit: float = 10.0) -> Answer:
    """Play ``case`` against ``app``: the whole response, within ``limit`` seconds."""
    answer = Answer()
    pending = _chunks(case.body, case.cuts)
    gone = trio.Event()
    tap = case.tap if case.tap is not None else (Tap() if case.listen else None)
    delivered = 0

    def hang_up() -> None:
        if not (answer.complete or answer.hung_up):
            answer.hung_up = True  # go away, as a client that has heard enough does
        gone.set()

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        await trio.lowlevel.checkpoint()
        leaving = case.leave_after is not None and delivered >= case.leave_after
        if pending and not leaving:
            if case.stall_after is not None and delivered >= case.stall_after:
                await gone.wait()  # a client that stops sending (until the server gives up)
                return {"type": "http.disconnect"}
            delivered += 1
            return pending.pop(0)
        if leaving and not (answer.complete or answer.hung_up):
            answer.client_left = True
            return {"type": "http.disconnect"}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()
        if answer.complete or answer.hung_up:
            if not answer.hung_up:
                answer.protocol.append(f"sent {message['type']} after the response ended")
            return
        if message["type"] == "http.response.start":
            if answer.status:
                answer.protocol.append("started the response twice")
            answer.status = message["status"]
            answer.headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            if not answer.status:
                answer.protocol.append("sent a body before starting the response")
            answer.body += message.get("body", b"")
            if not message.get("more_body", False):
                answer.complete = True
            elif tap is not None and b"\n\n" in answer.body:
                messages, _ = _parse_sse(answer.body, False)
                if messages:
                    tap.first.set()
                if tap.until(messages):
                    tap.done.set()
                    hang_up()
        else:
            answer.protocol.append(f"sent an unknown message {message['type']!r}")

    async def watch(tap: Tap) -> None:
        await tap.stop.wait()
        hang_up()

    started = time.perf_counter()
    with trio.move_on_after(limit) as timer:
        async with trio.open_nursery() as nursery:
            if tap is not None:
                nursery.start_soon(watch, tap)
            await app(_scope(case), receive, send)
            nursery.cancel_scope.cancel()
    gone.set()
    if tap is not None:
        tap.first.set()  # nobody waits for a stream that is over
        tap.done.set()
    answer.timed_out = timer.cancelled_caught
    answer.elapsed = time.perf_counter() - started
    return answer


# ====================================================================== the oracle

_EXCEPTION_NAME = re.compile(r"Traceback|File \"|\b[A-Z][A-Za-z]*(?:Error|Exception|Group)\b")
_VISIBLE = re.compile(rb"[\t\x20-\x7e]*")


def _declares(capabilities: Any, required: Any) -> bool:
    """Does a request's ``ClientCapabilities`` declare every object of ``required``?"""
    if not isinstance(required, dict):
        return True
    for key, sub in required.items():
        have = capabilities.get(key) if isinstance(capabilities, dict) else None
        if not isinstance(have, dict):
            return False
        if key == "elicitation" and not sub and have and "form" not in have:
            return False  # ``elicitation: {}`` means form mode (spec compatibility rule)
        if sub and not _declares(have, sub):
            return False
    return True


def _parse_sse(
    body: bytes, complete: bool, *, resumable: bool = False
) -> tuple[list[Any], list[str]]:
    """The messages of an SSE body (one per event), and what is wrong with its framing.
    ``resumable``: an older-era session's stream, whose events may carry ``id:`` (and its
    priming event ``retry:`` and empty data); a 2026-07-28 stream's never do."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return [], ["SSE body is not UTF-8"]
    *frames, rest = text.split("\n\n")
    problems: list[str] = []
    if rest and complete:
        problems.append(f"SSE body does not end with a blank line: {rest[:100]!r}")
    messages: list[Any] = []
    for frame in frames:  # ``rest`` is the partial frame of a stream we hung up on
        lines = frame.split("\n")
        data = [line[5:].lstrip(" ") for line in lines if line.startswith("data:")]
        allowed = (":", "data:", "event: message", *(("id: ", "retry: ") if resumable else ()))
        others = [x for x in lines if x and not x.startswith(allowed)]
        if others:
            problems.append(f"SSE frame has unexpected lines {others!r}")
        named = any(line.startswith("id: ") for line in lines)
        if not data or (named and data == [""]):
            continue  # a comment (keep-alive) frame, or a resumable stream's priming event
        if len(data) != 1:
            problems.append(f"SSE event holds {len(data)} data lines, not one message")
            continue
        try:
            messages.append(json.loads(data[0]))
        except ValueError:
            problems.append(f"SSE event data is not JSON: {data[0][:200]!r}")
    return messages, problems


def check(
    case: Case, answer: Answer, client: Client, records: Sequence[logging.LogRecord]
) -> list[str]:
    """Every way ``answer`` breaks the wire rules for ``case`` (empty: a good answer)."""
    problems = [f"ASGI: {p}" for p in answer.protocol]
    if answer.timed_out:
        problems.append("no complete answer within the time limit (a hang)")
    elif not (answer.client_left and not answer.status):  # else: nobody left to answer
        problems += _check_answer(case, answer, client)
    return problems + _check_logs(records)


def _check_logs(records: Sequence[logging.LogRecord]) -> list[str]:
    """No traceback, and no ERROR record: nothing a client sends is a server fault."""
    problems = []
    for record in records:
        if record.exc_info:
            problems.append(f"traceback logged: {record.getMessage()[:300]}")
        elif record.levelno >= logging.ERROR:
            problems.append(f"ERROR logged: {record.getMessage()[:300]}")
    return problems


def _check_answer(case: Case, answer: Answer, client: Client) -> list[str]:
    problems: list[str] = []
    status, body = answer.status, answer.body
    # cut: the client went away (a listen stream once acknowledged, or a case's client that
    # leaves early), so the response may end anywhere
    cut = answer.hung_up or (answer.client_left and not answer.complete)
    if status not in ALLOWED_STATUSES:
        problems.append(f"status {status} is not an allowed status")
    if not answer.complete and not cut:
        problems.append("the response never finished")
    ctype = answer.header(b"content-type") or ""
    length = answer.header(b"content-length")
    if length is not None and length != str(len(body)):
        problems.append(f"content-length {length} but the body has {len(body)} bytes")
    env = case.envelope

    # --- decided before the body is read: path, Host/Origin, HTTP method ---------------
    if case.path != ENDPOINT:
        if (status, ctype, body) != (404, "text/plain; charset=utf-8", b"Not Found"):
            problems.append(f"path {case.path!r} must be a plain 404, got {status} {ctype}")
        return problems
    if case.admission == "refused" and status != 403:
        problems.append(f"Host/Origin must be refused with 403, got {status}")
    if case.admission == "allowed" and status == 403:
        problems.append("an allowed Host/Origin was refused with 403")
    if case.method != "POST" and status not in (403, 405):
        problems.append(f"HTTP {case.method!r} must be 403 or 405, got {status}")
    if case.method == "POST" and status == 405:
        problems.append("POST answered 405")
    if status == 405:
        if answer.header(b"allow") != "POST" or ctype != "text/plain; charset=utf-8":
            problems.append("405 without 'Allow: POST' and a plain body")
        return problems

    # --- the body: JSON, SSE or nothing ----------------------------------------------
    messages: list[Any] = []
    streamed = ctype.startswith("text/event-stream")
    if status == 202:
        if body or env.kind != "notification":
            problems.append(f"202 for a {env.kind} (body {body[:100]!r})")
        elif _older_notification(case):
            problems.append("an older-era notification naming no session was taken (202)")
        return problems
    if streamed:
        if status != 200:
            problems.append(f"an SSE stream with status {status}")
        messages, found = _parse_sse(body, answer.complete)  # a cut stream may end mid-frame
        problems += found
        if answer.header(b"cache-control") != "no-cache":
            problems.append("an SSE stream without 'Cache-Control: no-cache'")
    elif ctype == "application/json":
        if not body:
            problems.append("an empty application/json body")
        else:
            try:
                messages = [json.loads(body)]
            except ValueError:
                problems.append(f"application/json body is not JSON: {body[:200]!r}")
    else:
        problems.append(f"unexpected content-type {ctype!r} with status {status}")
        return problems

    # --- every message --------------------------------------------------------------
    responses: list[dict[str, Any]] = []
    method = env.method or ""
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            problems.append(f"not a JSON-RPC 2.0 message: {str(message)[:200]}")
            continue
        if "method" in message and "id" in message:
            problems.append(f"the server sent a request: {str(message)[:200]}")
            continue
        try:
            client.check_incoming(message, method)
        except SchemaViolationError as exc:
            problems.append(f"schema violation: {exc}"[:1000])
        except Exception as exc:  # a shape check_incoming cannot even read
            problems.append(f"unreadable message {str(message)[:200]}: {exc!r}")
            continue
        if "method" in message:
            if index == len(messages) - 1 and not cut:
                problems.append("a stream that ends with a notification, not the response")
            continue
        responses.append(message)
    answered = env.kind in ("request", "invalid", "parse_error") and not cut
    if answered and len(responses) != 1:
        problems.append(f"{len(responses)} responses, not exactly one")
    if case.listen and answer.hung_up:
        first = messages[0] if messages else {}
        ack = isinstance(first, dict) and first.get("method") == (
            "notifications/subscriptions/acknowledged"
        )
        if not ack or first.get("params", {}).get("_meta", {}).get(META_SUBSCRIPTION) != env.id:
            problems.append(f"a listen stream that does not start with its ack: {first!r:.200}")
    for response in responses:
        problems += _check_response(case, answer, response, streamed)

    # --- what the envelope says the answer must be ------------------------------------
    codes = {r.get("error", {}).get("code") if "error" in r else None for r in responses}
    if status in (403, 413, 408):
        pass  # decided before the envelope was read
    elif cut and not responses:
        pass  # nothing answered yet when the client left
    elif env.kind == "parse_error" and codes != {-32700}:
        problems.append(f"a body that is not strict JSON must get -32700, got {codes}")
    elif env.kind == "invalid" and codes != {-32600}:
        problems.append(f"an invalid envelope must get -32600, got {codes}")
    elif env.kind == "notification" and _older_notification(case):
        # The initialize era's notification naming no session: refused like its requests.
        if (status, codes) != (400, {-32600}):
            problems.append(f"an older-era notification with no session got {status} {codes}")
    elif env.kind == "notification":
        problems.append(f"a notification must get 202, got {status}")
    elif (
        env.kind == "request"
        and env.method != "initialize"
        and _legacy_version_header(case.headers)
    ):
        # An older version's header without a session: the initialize era, which needs one.
        if (status, codes) != (400, {-32600}):
            problems.append(f"an older-era request with no session got {status} {codes}")
    elif env.kind == "request" and not codes <= (REQUEST_CODES | {None}):
        problems.append(f"a well-formed request got codes {codes}")
    if env.kind != "parse_error" and -32700 in codes and status not in (403, 413, 408):
        problems.append("strict JSON answered -32700")
    stalled = case.stall_after is not None and case.stall_after < len(_chunks(case.body, case.cuts))
    if status == 408 and not stalled and answer.elapsed < SLOW_BODY_TIMEOUT:
        problems.append("408 for a body that arrived whole, before any timeout ran out")
    if stalled and case.method == "POST" and status not in (403, 408, 413):
        problems.append(f"a body that stopped arriving must get 408, got {status}")
    if len(case.body) > MAX_BODY and status not in (403, 413, 408):
        problems.append(f"a {len(case.body)}-byte body must be refused with 413, got {status}")
    if status == 413 and len(case.body) <= MAX_BODY:
        problems.append(f"413 for a {len(case.body)}-byte body")
    if (
        env.kind == "request"
        and env.method != "initialize"
        and status not in (403, 413, 408)
        and _version_header_defective(case.headers)
        and not _legacy_version_header(case.headers)
        and codes != {-32020}
    ):
        problems.append(f"a missing/repeated/non-ASCII version header must be -32020: {codes}")
    if case.expect is not None:
        expected = case.expect
        if status not in expected.statuses or not codes <= expected.codes:
            problems.append(
                f"expected {sorted(expected.statuses)} {sorted(expected.codes, key=str)} "
                f"({expected.why}), got {status} {codes}"
            )

    return problems


def _legacy_version_header(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    """Whether the one version header (visible ASCII, blanks around it aside) names an
    older (``initialize`` era) revision."""
    values = [v for k, v in headers if k.lower() == b"mcp-protocol-version"]
    return (
        len(values) == 1
        and _VISIBLE.fullmatch(values[0]) is not None
        and values[0].strip(b" \t") in (b"2025-06-18", b"2025-11-25")
    )


def _older_notification(case: Case) -> bool:
    """A notification the initialize era claims (by an older version header) on a POST
    that names no session."""
    named = any(k.lower() == b"mcp-session-id" for k, _ in case.headers)
    return not named and _legacy_version_header(case.headers)


def _version_header_defective(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    values = [v for k, v in headers if k.lower() == b"mcp-protocol-version"]
    return len(values) != 1 or not _VISIBLE.fullmatch(values[0])


def _check_response(
    case: Case, answer: Answer, response: dict[str, Any], streamed: bool
) -> list[str]:
    problems: list[str] = []
    env, status = case.envelope, answer.status
    if "id" in response and response["id"] is None:
        problems.append('a response with "id": null')
    before_envelope = status in (403, 413, 408) or env.kind == "parse_error"
    expected_id = None if before_envelope else env.id
    if expected_id is None:
        if "id" in response:
            problems.append(f"an id {response['id']!r} the request did not readably carry")
    elif response.get("id") != expected_id or type(response.get("id")) is not type(expected_id):
        problems.append(f"id {response.get('id')!r} does not echo the request id {expected_id!r}")
    if "result" in response:
        if env.kind != "request":
            problems.append(f"a result for a {env.kind}")
        if status != 200:
            problems.append(f"a result with status {status}")
        result = response["result"]
        if not isinstance(result, dict) or not isinstance(result.get("resultType"), str):
            problems.append("a result without resultType")
        elif META_SERVER_INFO not in (result.get("_meta") or {}):
            problems.append("a result without _meta serverInfo")
        return problems
    error = response.get("error")
    if not isinstance(error, dict):
        return [*problems, f"neither result nor error: {response!r:.200}"]
    code, text = error.get("code"), str(error.get("message", ""))
    if code not in STATUS_OF_CODE:
        problems.append(f"unexpected error code {code!r}")
    elif not streamed and status not in STATUS_OF_CODE[code]:
        problems.append(f"code {code} with HTTP {status}")
    request_text = case.body.decode("utf-8", "replace") + "".join(
        v.decode("latin-1") for _, v in case.headers
    )
    leaked = [m for m in _EXCEPTION_NAME.findall(text) if m not in request_text]
    if leaked or "\n  File " in text:
        problems.append(f"error message leaks Python internals {leaked}: {text[:300]!r}")
    data = error.get("data")
    if code == -32021:
        required = data.get("requiredCapabilities") if isinstance(data, dict) else None
        if not isinstance(required, dict) or _declares(env.capabilities, required):
            problems.append(f"-32021 for capabilities the request declared: {required!r}")
    if code == -32022:
        supported = data.get("supported") if isinstance(data, dict) else None
        if not isinstance(supported, list) or PROTOCOL_VERSION not in supported:
            problems.append(f"-32022 without the supported versions: {data!r}")
    if code == -32603 and status == 503 and not (isinstance(data, dict) and data.get("retryable")):
        problems.append("a 503 that is not marked retryable")
    if code == -32603 and status == 500:
        problems.append(f"a 500: {text!r}")
    if status == 403 and not text.startswith("Forbidden"):
        problems.append(f"a 403 that does not say Forbidden: {text!r}")
    return problems


# ====================================================================== strategies: JSON


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of ``choices``, each drawn in proportion to its weight (shrinking to the first)."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(table).flatmap(lambda strategy: strategy)


@cache  # a strategy is built (and validated) once, then reused
def one_in(n: int) -> st.SearchStrategy[bool]:
    """True about once in ``n`` draws (``st.integers(0, n - 1) == 0`` is far likelier: the
    engine favours small integers); shrinks to False."""
    return st.sampled_from([False] * (n - 1) + [True])


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=6,
)
json_objects = st.dictionaries(st.text(max_size=10), json_values, max_size=5)

#: JSON text that is not plain data: non-finite, huge, deep, surrogate escapes.
raw_tokens = st.sampled_from(
    [
        Raw("NaN"),
        Raw("Infinity"),
        Raw("-Infinity"),
        Raw("1e400"),
        Raw("-0"),
        Raw("1.0"),
        Raw("1E2"),
        Raw("123456789012345678901234567890"),
        Raw('"\\ud800"'),
        Raw('"\\udfff"'),
        Raw('"x\\ud83dy"'),
        Raw('"\\ud83d\\ude00"'),
        Raw('"\\u0000"'),
        Raw('"\\u2028"'),
    ]
)


@st.composite
def deep(draw: st.DrawFn) -> Raw:
    """Arrays or objects nested ``n`` levels (straddling the 128 limit, or far past it)."""
    n = draw(st.integers(100, 140) | st.integers(1, 3000))
    if draw(st.booleans()):
        return Raw("[" * n + "]" * n)
    return Raw('{"a":' * n + "1" + "}" * n)


anything = json_values | raw_tokens | deep()
surrogate_text = st.text(
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF) | st.characters(), max_size=6
)


# ====================================================================== strategies: envelopes

request_ids = weighted(
    (4, st.integers(0, 1000)),
    (2, st.integers(-(2**70), 2**70)),
    (3, st.text(max_size=12)),
    (1, st.sampled_from(["", "0", "1", "null", "a\x00b", "\u00e9", "\U0001f600"])),
    (1, st.floats(allow_nan=False, allow_infinity=False)),
    (1, st.none() | st.booleans()),
    (1, st.dictionaries(st.text(max_size=3), json_scalars, max_size=2)),
    (1, st.lists(json_scalars, max_size=2)),
    (1, raw_tokens),
)

capability_values = st.sampled_from([{}, {"form": {}}, {"url": {}}, {"form": {}, "url": {}}])


@st.composite
def capabilities(draw: st.DrawFn) -> Any:
    if draw(one_in(20)):
        return draw(json_values)
    caps: dict[str, Any] = {}
    if draw(st.booleans()):
        caps["elicitation"] = draw(capability_values | st.just(True))
    if draw(st.booleans()):
        caps["sampling"] = draw(st.sampled_from([{}, {"tools": {}}, {"context": {}}, True]))
    if draw(st.booleans()):
        caps["roots"] = draw(st.sampled_from([{}, {"listChanged": True}, "yes"]))
    if draw(st.booleans()):
        settings_ = draw(weighted((3, st.just({})), (1, json_values)))
        caps["extensions"] = draw(
            st.just({TASKS: settings_}) | st.dictionaries(st.text(max_size=20), json_values)
        )
    if draw(one_in(5)):
        caps.update(draw(json_objects))
    return caps


client_infos = weighted(
    (6, st.just({"name": "fuzz", "version": "1"})),
    (1, st.fixed_dictionaries({"name": st.text(max_size=8), "version": st.text(max_size=8)})),
    (1, json_values),
)


@st.composite
def metas(draw: st.DrawFn, *, valid: bool = False) -> Any:
    """A request's ``_meta``: usually valid, else one of the ways it goes wrong."""
    meta: dict[str, Any] = {
        META_VERSION: PROTOCOL_VERSION,
        META_CAPS: draw(capabilities()) if not valid else draw(valid_capabilities()),
        META_INFO: {"name": "fuzz", "version": "1"} if valid else draw(client_infos),
    }
    if draw(one_in(6)):
        levels = st.sampled_from(LOG_LEVELS)
        meta[META_LOG_LEVEL] = draw(levels if valid else levels | st.text(max_size=8))
    if draw(one_in(6)):
        meta["progressToken"] = draw(
            st.integers(-(2**64), 2**64) | st.text(max_size=8)
            if valid
            else st.integers() | st.text(max_size=8) | st.floats() | st.booleans()
        )
    if valid:
        return meta
    fault = draw(
        st.sampled_from(
            ["none"] * 8
            + [
                "missing",
                "not_object",
                "no_version",
                "bad_version",
                "no_caps",
                "caps_not_object",
                "raw",
                "extra",
                "deep",
            ]
        )
    )
    if fault == "missing":
        return None
    if fault == "not_object":
        return draw(json_scalars | st.lists(json_scalars, max_size=2))
    if fault == "no_version":
        meta.pop(META_VERSION)
    elif fault == "bad_version":
        meta[META_VERSION] = draw(
            st.sampled_from(["2025-06-18", "2025-11-25", "2026-07-29", "", " 2026-07-28"])
            | json_values
        )
    elif fault == "no_caps":
        meta.pop(META_CAPS)
    elif fault == "caps_not_object":
        meta[META_CAPS] = draw(json_scalars | st.lists(json_scalars, max_size=2))
    elif fault == "raw":
        meta[draw(st.sampled_from([META_VERSION, "progressToken", "x", META_CAPS]))] = draw(
            raw_tokens
        )
    elif fault == "extra":
        meta.update(draw(json_objects))
    elif fault == "deep":
        meta[META_CAPS] = {"x": draw(deep())}
    return meta


@st.composite
def valid_capabilities(draw: st.DrawFn) -> dict[str, Any]:
    caps: dict[str, Any] = {}
    if draw(st.booleans()):
        caps["elicitation"] = draw(capability_values)
    if draw(st.booleans()):
        caps["sampling"] = {}
    if draw(st.booleans()):
        caps["roots"] = {}
    if draw(st.booleans()):
        caps["extensions"] = {TASKS: {}}
    return caps


# ====================================================================== strategies: params

names_of_tools = st.sampled_from(TOOL_NAMES) | st.text(max_size=10) | json_scalars
uris = st.one_of(
    st.sampled_from(RESOURCE_URIS),
    st.builds(
        "test://template/{}/data".format,
        st.text(max_size=10)
        | st.sampled_from(["..", "../..", "%2e%2e", "a/b", "a%2Fb", "", " ", "?", "#", "x?y=1"]),
    ),
    st.sampled_from(
        [
            "test://template/../../etc/passwd/data",
            "test://static-text/../static-binary",
            "file:///etc/passwd",
            "../../../../etc/passwd",
            "test://",
            "test:",
            "TEST://STATIC-TEXT",
            "test://static-text#frag",
            "test://static-text?x=1",
            "http://169.254.169.254/latest/meta-data/",
            "\\\\server\\share",
            "",
        ]
    ),
    st.text(max_size=20),
    json_scalars,
)


@cache  # a strategy is built (and validated) once, then reused
def _tool_arguments(name: object) -> st.SearchStrategy[Any]:
    plausible: st.SearchStrategy[Any] = st.just({})
    if name == "greet":
        plausible = st.fixed_dictionaries({}, optional={"name": st.text(max_size=10)})
    elif name == "slow_compute":  # bounded: a tool that sleeps as asked is not a hang
        plausible = st.fixed_dictionaries(
            {},
            optional={
                "seconds": st.floats(0, 0.003) | st.integers(-3, 0) | st.text(max_size=3),
                "label": st.text(max_size=10),
            },
        )
    elif name == "confirm_delete":
        plausible = st.fixed_dictionaries({"filename": st.text(max_size=10) | json_scalars})
    elif name == "test_header_param":
        plausible = st.fixed_dictionaries({"region": st.text(max_size=10) | json_scalars})
    elif name == "json_schema_2020_12_tool":
        plausible = st.fixed_dictionaries(
            {},
            optional={
                "name": st.text(max_size=6),
                "contactMethod": st.sampled_from(["phone", "email", "fax"]),
                "phone": st.text(max_size=6),
                "email": st.text(max_size=6),
                "address": st.fixed_dictionaries({"street": st.text(max_size=5)}),
            },
        )
    return st.one_of(plausible, plausible, json_objects.map(_tame), json_values.map(_tame))


def _tame(arguments: Any) -> Any:
    """No drawn ``seconds`` may make ``slow_compute`` sleep for long (it sleeps as asked)."""
    if isinstance(arguments, dict) and "seconds" in arguments:
        seconds = arguments["seconds"]
        if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0:
            arguments = {**arguments, "seconds": 0.001}
    return arguments


input_response_values = st.one_of(
    st.fixed_dictionaries(
        {"action": st.sampled_from(["accept", "decline", "cancel", "maybe"])},
        optional={
            "content": st.dictionaries(
                st.sampled_from(["name", "ok", "confirm", "color", "context", "value"]),
                st.text(max_size=5) | st.booleans() | st.integers(),
                max_size=2,
            )
        },
    ),
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "content": st.fixed_dictionaries(
                {"type": st.just("text"), "text": st.text(max_size=5)}
            ),
            "model": st.just("m"),
        }
    ),
    st.fixed_dictionaries(
        {"roots": st.lists(st.fixed_dictionaries({"uri": st.just("file:///tmp")}), max_size=2)}
    ),
    json_values,
)
input_keys = st.sampled_from(
    [
        *("user_name", "confirm", "capital_question", "client_roots", "greeting", "step1"),
        *("step2", "first-input", "second-input", "confirm-delete", "elicit_input"),
        *("sample_input", ""),
    ]
) | st.text(max_size=6)
input_responses = st.dictionaries(input_keys, input_response_values, max_size=3) | json_values
request_states = st.one_of(
    st.sampled_from(["", "s1", "s1.k0.e30.AAAA", "s1.k0..", "s2.k0.e30.x", "s1.k1.e30.x"]),
    st.text(max_size=30),
    st.builds(
        lambda kid, body, mac: f"s1.{kid}.{body}.{mac}",
        st.sampled_from(["k0", "k1", ""]),
        st.binary(max_size=30).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")),
        st.binary(min_size=32, max_size=32).map(
            lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")
        ),
    ),
    json_scalars,
)
task_ids = st.one_of(
    st.text(max_size=12),
    st.text(min_size=250, max_size=300),
    st.sampled_from(["", "../../etc/passwd", "%00", "a" * 256, "a" * 257, "\u00e9" * 129]),
    json_scalars,
)
cursors = st.one_of(
    st.builds(lambda n: base64.urlsafe_b64encode(f"o:{n}".encode()).decode(), st.integers()),
    st.sampled_from(["", "o:0", "b206MA==", "b206LTE=", "!!!", "b206" + "OTk5" * 20]),
    st.text(max_size=10),
    json_scalars,
)
listen_filters = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "toolsListChanged": st.booleans() | json_scalars,
            "promptsListChanged": st.booleans(),
            "resourcesListChanged": st.booleans(),
            "resourceSubscriptions": st.lists(uris, max_size=3) | json_scalars,
            "taskIds": st.lists(task_ids, max_size=3) | json_scalars,
        },
    ),
    json_values,
)


@cache  # a strategy is built (and validated) once, then reused
def _params_for(method: str) -> st.SearchStrategy[Any]:
    if method == "tools/call":
        base = names_of_tools.flatmap(
            lambda name: st.fixed_dictionaries(
                {"name": st.just(name)},
                optional={
                    "arguments": _tool_arguments(name),
                    "inputResponses": input_responses,
                    "requestState": request_states,
                },
            )
        )
    elif method == "resources/read":
        base = st.fixed_dictionaries(
            {"uri": uris},
            optional={"inputResponses": input_responses, "requestState": request_states},
        )
    elif method == "prompts/get":
        base = st.fixed_dictionaries(
            {"name": st.sampled_from(PROMPT_NAMES) | st.text(max_size=8) | json_scalars},
            optional={
                "arguments": st.dictionaries(
                    st.sampled_from(["arg1", "arg2", "resourceUri", "x"]) | st.text(max_size=4),
                    st.text(max_size=10)
                    | st.sampled_from(["test://x", "a:b", "not a uri", "http://[::1"]),
                    max_size=3,
                )
                | json_values,
                "inputResponses": input_responses,
                "requestState": request_states,
            },
        )
    elif method == "completion/complete":
        base = st.fixed_dictionaries(
            {
                "ref": st.one_of(
                    st.fixed_dictionaries(
                        {
                            "type": st.just("ref/prompt"),
                            "name": st.sampled_from(PROMPT_NAMES) | st.text(max_size=6),
                        }
                    ),
                    st.fixed_dictionaries({"type": st.just("ref/resource"), "uri": uris}),
                    json_values,
                ),
                "argument": st.fixed_dictionaries(
                    {"name": st.sampled_from(["arg1", "arg2", "id"]), "value": st.text(max_size=5)}
                )
                | json_values,
            },
            optional={"context": st.fixed_dictionaries({"arguments": json_values}) | json_values},
        )
    elif method == "subscriptions/listen":
        base = st.fixed_dictionaries({"notifications": listen_filters})
    elif method.startswith("tasks/"):
        base = st.fixed_dictionaries(
            {"taskId": task_ids}, optional={"inputResponses": input_responses}
        )
    elif method.endswith("/list"):
        base = st.fixed_dictionaries({}, optional={"cursor": cursors})
    else:
        base = st.just({})
    return weighted((4, base), (1, json_objects), (1, json_values))


# ====================================================================== strategies: headers

GOOD_HOSTS = [
    b"localhost",
    b"localhost:8000",
    b"127.0.0.1",
    b"127.0.0.1:8000",
    b"[::1]",
    b"[::1]:8000",
    b"::1",
    b"LOCALHOST:1",
    b" localhost ",
]
EVIL_HOSTS = [
    b"evil.com",
    b"evil.com:8000",
    b"localhost.evil.com",
    b"127.0.0.1.nip.io",
    b"127.0.0.2",
    b"0.0.0.0",
    b"[::2]",
    b"[::ffff:127.0.0.1]",
    b"::1:8000",
    b"",
    b"localhost:8000:80",
    b"example.com",
]
GOOD_ORIGINS = [
    b"null",
    b"http://localhost",
    b"http://localhost:3000",
    b"https://127.0.0.1",
    b"http://[::1]:8080",
    b"HTTP://LOCALHOST",
]
EVIL_ORIGINS = [
    b"http://evil.com",
    b"https://localhost.evil.com",
    b"http://127.0.0.1.evil.com",
    b"http://localhost@evil.com",
    b"file://",
    b"chrome-extension://abcdef",
    b"ftp://localhost",
    b"http://[::1",
    b"localhost",
    b"",
    b"http://",
]


@st.composite
def hosts_and_origins(draw: st.DrawFn) -> tuple[list[tuple[bytes, bytes]], str]:
    """Host and Origin headers, with what they deserve: allowed, refused or unknown."""
    headers: list[tuple[bytes, bytes]] = []
    verdicts: list[str] = []
    host_kind = draw(st.sampled_from(["good"] * 30 + ["missing", "evil", "evil", "random", "two"]))
    if host_kind == "good":
        headers.append((b"host", draw(st.sampled_from(GOOD_HOSTS))))
        verdicts.append("allowed")
    elif host_kind == "evil":
        headers.append((b"host", draw(st.sampled_from(EVIL_HOSTS))))
        verdicts.append("refused")
    elif host_kind == "random":
        headers.append((b"host", draw(st.binary(max_size=20))))
        verdicts.append("unknown")
    elif host_kind == "two":
        pair = draw(st.lists(st.sampled_from(GOOD_HOSTS + EVIL_HOSTS), min_size=2, max_size=2))
        headers += [(b"host", h) for h in pair]
        verdicts.append("unknown")  # h11 refuses this; other servers hand the app both
    origin_kind = draw(
        st.sampled_from(["missing"] * 30 + ["good", "good", "evil", "random", "two"])
    )
    if origin_kind == "good":
        headers.append((b"origin", draw(st.sampled_from(GOOD_ORIGINS))))
        verdicts.append("allowed")
    elif origin_kind == "evil":
        headers.append((b"origin", draw(st.sampled_from(EVIL_ORIGINS))))
        verdicts.append("refused")
    elif origin_kind == "random":
        headers.append((b"origin", draw(st.binary(max_size=30))))
        verdicts.append("unknown")
    elif origin_kind == "two":
        pair = draw(st.lists(st.sampled_from(GOOD_ORIGINS + EVIL_ORIGINS), min_size=2, max_size=2))
        headers += [(b"origin", o) for o in pair]
        verdicts.append("unknown")
    if "refused" in verdicts:
        verdict = "refused"
    elif "unknown" in verdicts:
        verdict = "unknown"
    else:
        verdict = "allowed"
    return headers, verdict


def b64_header(value: str) -> bytes:
    return b"=?base64?" + base64.b64encode(value.encode("utf-8", "surrogatepass")) + b"?="


def _plain_or_b64(value: str) -> bytes:
    """How a client sends ``value`` in a header: plain when it is safe visible ASCII."""
    safe = value and value.isascii() and value.isprintable() and value == value.strip()
    if safe and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value.encode()
    return b64_header(value)


header_junk = st.sampled_from(
    [
        b"",
        b" ",
        b"\r\nX-Injected: 1",
        b"tools/call\r\nMcp-Name: greet",
        b"\xff\xfe",
        b"caf\xc3\xa9",
        b"=?base64?",
        b"=?base64??=",
        b"=?base64?!!!?=",
        b"=?base64?Z3JlZXQ?=",
        b"=?base64?/w==?=",
        b"=?BASE64?Z3JlZXQ=?=",
        b"\x00",
        b"\t",
    ]
) | st.binary(max_size=16)


@st.composite
def routing_header(
    draw: st.DrawFn, name: bytes, true_value: object, *, encoded: bool = False
) -> list[tuple[bytes, bytes]]:
    """One MCP routing header: right (mostly), missing, wrong, repeated or junk."""
    right: bytes | None = None
    if isinstance(true_value, str):
        right = _plain_or_b64(true_value) if encoded else true_value.encode("utf-8", "replace")
    kind = draw(
        st.sampled_from(["right"] * 30 + ["missing", "wrong", "repeat", "junk", "b64", "pad"])
    )
    if kind == "right" and right is not None:
        return [(name, right)]
    if kind == "missing":
        return []
    if kind == "repeat" and right is not None:
        return [(name, right), (name, draw(st.just(right) | header_junk))]
    if kind == "b64" and isinstance(true_value, str):
        return [(name, b64_header(true_value))]
    if kind == "pad" and right is not None:
        return [(name, draw(st.sampled_from([b" ", b"\t", b""])) + right + b" ")]
    if kind == "wrong":
        return [(name, draw(st.text(max_size=10)).encode("utf-8", "replace"))]
    return [(name, draw(header_junk))]


@st.composite
def header_sets(draw: st.DrawFn, message: Any) -> tuple[list[tuple[bytes, bytes]], str]:
    """All the headers of one POST, mostly consistent with ``message``, each maybe broken."""
    headers, admission = draw(hosts_and_origins())
    content_type = draw(
        st.sampled_from(
            [b"application/json"] * 6
            + [b"application/json; charset=utf-8", b"text/plain", b"", b"application/x-www-form"]
            + [None]
        )
    )
    if content_type is not None:
        headers.append((b"content-type", content_type))
    accept = draw(
        st.sampled_from(
            [b"application/json, text/event-stream"] * 6
            + [b"application/json", b"text/event-stream", b"*/*", b"text/html", None]
        )
    )
    if accept is not None:
        headers.append((b"accept", accept))
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(META_VERSION) if isinstance(meta, dict) else None
    headers += draw(
        routing_header(
            b"mcp-protocol-version", version if isinstance(version, str) else PROTOCOL_VERSION
        )
    )
    method = message.get("method") if isinstance(message, dict) else None
    headers += draw(routing_header(b"mcp-method", method))
    name_param = NAME_PARAM.get(method) if isinstance(method, str) else None
    if name_param is not None and isinstance(params, dict):
        headers += draw(routing_header(b"mcp-name", params.get(name_param), encoded=True))
    elif draw(one_in(10)):
        headers += draw(routing_header(b"mcp-name", draw(st.text(max_size=6)), encoded=True))
    arguments = params.get("arguments") if isinstance(params, dict) else None
    region = arguments.get("region") if isinstance(arguments, dict) else None
    if region is not None or draw(one_in(10)):
        value = region if isinstance(region, str) else json.dumps(region)
        headers += draw(routing_header(b"mcp-param-region", value, encoded=True))
    if draw(one_in(10)):
        extra = draw(st.sampled_from([b"mcp-param-x", b"mcp-param-", b"mcp-", b"x-custom"]))
        headers.append((extra, draw(header_junk)))
    if draw(one_in(4)):  # header order means nothing; now and then, show it
        headers = draw(st.permutations(headers))
    return headers, admission


# ====================================================================== strategies: cases

http_methods = st.sampled_from(
    ["POST"] * 12 + ["GET", "DELETE", "PUT", "OPTIONS", "HEAD", "PATCH", "post", "TRACE", ""]
)
paths = weighted(
    (12, st.just(ENDPOINT)),
    (1, st.sampled_from(["/", "/mcp/", "/MCP", "//mcp", "/mcp/../mcp", "/mcp%00", "/mcp;x", ""])),
    (1, st.text(max_size=8).map(lambda s: "/" + s)),
)


_RPC_METHODS = weighted(
    (8, st.sampled_from(ROUTED)),
    (1, st.sampled_from(OTHER_METHODS)),
    (1, st.text(max_size=12)),
)


@st.composite
def rpc_messages(draw: st.DrawFn) -> Any:
    """JSON-RPC-shaped objects: routed or random methods, any params, ids and ``_meta``."""
    method = draw(_RPC_METHODS)
    if method == "subscriptions/listen" and not draw(one_in(3)):
        method = "tools/call"  # listen is costlier than the rest; draw it less often
    params = draw(_params_for(method))
    meta = draw(metas())
    if isinstance(params, dict) and meta is not None:
        params = {**params, "_meta": meta}
    message: dict[str, Any] = {}
    jsonrpc = draw(st.sampled_from(["2.0"] * 40 + ["1.0", "2", None, "missing", "raw"]))
    if jsonrpc == "raw":
        message["jsonrpc"] = Raw("2.0")
    elif jsonrpc != "missing":
        message["jsonrpc"] = jsonrpc
    shape = draw(st.sampled_from(["request"] * 30 + ["notification", "weird_method", "response"]))
    if shape != "notification":
        message["id"] = draw(request_ids)
    if shape == "weird_method":
        message["method"] = draw(json_scalars | st.lists(json_scalars, max_size=1))
    elif shape != "response":
        message["method"] = method
    if shape == "response":
        message[draw(st.sampled_from(["result", "error"]))] = draw(json_values)
    if not draw(one_in(6)):
        message["params"] = params
    if draw(one_in(16)):
        key = draw(st.sampled_from(["id", "method", "jsonrpc", "params"]))
        items = [*message.items(), (key, draw(anything))]
        return Pairs(tuple(items))  # a duplicate key: the last one wins in Python's json
    if draw(one_in(16)):
        message.update(draw(json_objects))
    return message


@st.composite
def encode_body(draw: st.DrawFn, message: Any) -> bytes:
    """The bytes of ``message``: usually UTF-8 JSON, sometimes a broken encoding of it."""
    text = to_json(message, ascii_only=draw(st.booleans()))
    how = draw(st.sampled_from(["utf-8"] * 40 + ["bom", "utf-16", "latin-1", "space", "trail"]))
    if how == "bom":
        return b"\xef\xbb\xbf" + text.encode("utf-8", "surrogatepass")
    if how == "utf-16":
        return text.encode("utf-16", "surrogatepass")
    if how == "latin-1":
        return text.encode("latin-1", "replace")
    if how == "space":
        return b" \n\t" + text.encode("utf-8", "surrogatepass") + b"\r\n"
    if how == "trail":
        return text.encode("utf-8", "surrogatepass") + draw(
            st.sampled_from([b"x", b"{}", b",", b"\x00", b"]"])
        )
    return text.encode("utf-8", "surrogatepass")


@st.composite
def cuts_for(draw: st.DrawFn, body: bytes) -> tuple[int, ...]:
    if not body or not draw(one_in(5)):
        return ()
    return tuple(draw(st.lists(st.integers(0, len(body)), max_size=4)))


@st.composite
def rpc_cases(draw: st.DrawFn) -> Case:
    """Family "rpc": JSON-RPC-shaped messages with header sets derived from them."""
    message = draw(rpc_messages())
    body = draw(encode_body(message))
    headers, admission = draw(header_sets(message))
    return Case(body, headers, admission=admission, cuts=draw(cuts_for(body)), label="rpc")


@st.composite
def raw_cases(draw: st.DrawFn) -> Case:
    """Family "raw": arbitrary bytes, arbitrary JSON values, mangled JSON text."""
    kind = draw(st.sampled_from(["bytes", "json", "text", "mangled", "deep"]))
    if kind == "bytes":
        body = draw(st.binary(max_size=200))
    elif kind == "json":
        body = to_json(draw(anything)).encode()
    elif kind == "text":
        body = draw(surrogate_text).encode("utf-8", "surrogatepass")
    elif kind == "deep":
        inner = draw(deep()).text
        body = f'{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{inner}}}'.encode()
    else:
        whole = to_json(draw(rpc_messages())).encode()
        cut = draw(st.integers(0, len(whole)))
        body = whole[:cut] + draw(st.binary(max_size=4)) + whole[cut + 1 :]
    ok, value = strict_json(body)
    headers, admission = draw(header_sets(value if ok else None))
    return Case(body, headers, admission=admission, cuts=draw(cuts_for(body)), label=f"raw/{kind}")


_BIG = b"x" * (1024 * 1024)


@st.composite
def http_cases(draw: st.DrawFn) -> Case:
    """Family "http": methods, paths, Host/Origin, chunking and oversize bodies."""
    method = draw(http_methods)
    path = draw(paths)
    message = draw(rpc_messages() | valid_messages())
    body = draw(encode_body(message))
    if draw(one_in(25)):  # over the 4 MiB limit, delivered in 1 MiB chunks
        body = _BIG * 4 + body[: draw(st.integers(1, 10))]
        cuts: tuple[int, ...] = tuple(range(len(_BIG), len(body), len(_BIG)))
    else:
        cuts = draw(cuts_for(body)) or tuple(draw(st.lists(st.integers(0, len(body)), max_size=6)))
    headers, admission = draw(header_sets(message))
    case = Case(body, headers, method, path, admission, cuts, label="http")
    if draw(one_in(6)):  # the client goes away mid-body, or right after it
        case.leave_after = draw(st.integers(0, len(_chunks(body, cuts))))
    return case


# ====================================================================== the valid family


def good_headers(message: dict[str, Any]) -> list[tuple[bytes, bytes]]:
    """The headers a correct client sends for ``message``."""
    method = message["method"]
    params = message["params"]
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", params["_meta"][META_VERSION].encode()),
        (b"mcp-method", method.encode()),
    ]
    name_param = NAME_PARAM.get(method)
    if name_param is not None and isinstance(params.get(name_param), str):
        headers.append((b"mcp-name", _plain_or_b64(params[name_param])))
    region = (params.get("arguments") or {}).get("region")
    if method == "tools/call" and isinstance(region, str):
        headers.append((b"mcp-param-region", _plain_or_b64(region)))
    return headers


@st.composite
def valid_messages(draw: st.DrawFn) -> dict[str, Any]:
    """A well-formed request for a routed method, with plausible params."""
    method = draw(st.sampled_from([m for m in ROUTED if not m.startswith("tasks/")]))
    params: dict[str, Any] = {}
    if method == "tools/call":
        name = draw(st.sampled_from(TOOL_NAMES))
        params = {"name": name}
        arguments = draw(_valid_arguments(name))
        if arguments is not None:
            params["arguments"] = arguments
    elif method == "resources/read":
        params["uri"] = draw(
            st.sampled_from(RESOURCE_URIS)
            | st.builds(
                "test://template/{}/data".format,
                st.text("abcXYZ019-_.~", min_size=1, max_size=10),
            )
        )
    elif method == "prompts/get":
        name = draw(st.sampled_from(PROMPT_NAMES))
        params = {"name": name}
        arguments = {arg: draw(st.text(max_size=10)) for arg in REQUIRED_PROMPT_ARGS[name]}
        if "resourceUri" in arguments:
            arguments["resourceUri"] = draw(  # free text: a prompt argument has no schema
                weighted(
                    (4, st.text("abcdef0123", max_size=8).map("test://{}".format)),
                    (1, st.text(max_size=8)),
                )
            )
        if arguments or draw(st.booleans()):
            params["arguments"] = arguments
    elif method == "completion/complete":
        params = {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": draw(st.sampled_from(["arg1", "arg2"])), "value": "te"},
        }
    elif method == "subscriptions/listen":
        params = {
            "notifications": draw(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "toolsListChanged": st.booleans(),
                        "promptsListChanged": st.booleans(),
                        "resourcesListChanged": st.booleans(),
                        "resourceSubscriptions": st.lists(
                            st.sampled_from(RESOURCE_URIS), max_size=2
                        ),
                    },
                )
            )
        }
    params["_meta"] = draw(metas(valid=True))
    request_id = draw(st.integers(-(2**53), 2**53) | st.text(max_size=10))
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


@cache  # a strategy is built (and validated) once, then reused
def _valid_arguments(name: str) -> st.SearchStrategy[dict[str, Any] | None]:
    if name in ("greet",):
        return st.none() | st.fixed_dictionaries({}, optional={"name": st.text(max_size=10)})
    if name == "slow_compute":
        return st.fixed_dictionaries(
            {}, optional={"seconds": st.floats(0, 0.002), "label": st.text(max_size=10)}
        )
    if name == "confirm_delete":
        return st.fixed_dictionaries({"filename": st.text(max_size=10)})
    if name == "test_header_param":
        return st.fixed_dictionaries({"region": st.text(max_size=10)})
    if name == "json_schema_2020_12_tool":
        return st.fixed_dictionaries(
            {"contactMethod": st.just("email"), "email": st.text(max_size=6)},
            optional={"name": st.text(max_size=6)},
        )
    return st.none() | st.just({})


@st.composite
def valid_cases(draw: st.DrawFn) -> Case:
    """Family "valid": what a correct client sends; it must be served.

    200 with one result, except where the request lacks a capability the call needs
    (-32021, checked to name a capability the request did not declare).
    """
    message = draw(valid_messages())
    body = json.dumps(message, ensure_ascii=draw(st.booleans())).encode()
    expect = Expect(frozenset({200, 400}), frozenset({None, -32021}), "a valid request")
    if message["method"] not in ("tools/call", "prompts/get"):  # the ones that may ask
        expect = Expect(frozenset({200}), frozenset({None}), "a valid request needing nothing")
    uri = (message["params"].get("arguments") or {}).get("resourceUri")
    if isinstance(uri, str) and not URI_PATTERN.fullmatch(uri):
        why = "the fixture prompt refuses a resourceUri that is not a URI"
        expect = Expect(frozenset({400}), frozenset({-32602}), why)
    case = Case(body, good_headers(message), expect=expect, label="valid")
    if draw(one_in(10)):  # the client sends it all and goes away: the call is cancelled
        case.leave_after = len(_chunks(body, ()))
        case.label = "valid/left"
    return case


# ====================================================================== multi-step scenarios


class Play:
    """What a scenario plays its exchanges through (the ``Harness``)."""

    async def run(
        self, case: Case, more: Callable[[Answer, dict[str, Any] | None], list[str]] | None = None
    ) -> tuple[Answer, dict[str, Any] | None]:
        """Play ``case``, check its answer (and ``more`` checks a scenario adds); return the
        answer and its JSON-RPC response, if any."""
        raise NotImplementedError

    async def unchecked(self, case: Case) -> Answer:
        """Play ``case`` and judge nothing (a scenario's clean-up after a failure)."""
        raise NotImplementedError


@dataclass
class Scenario:
    """Several exchanges; later ones are built from earlier answers."""

    steps: list[Any]
    label: str

    async def play(self, play: Play) -> None:
        raise NotImplementedError


@dataclass
class Single(Scenario):
    case: Case | None = None

    async def play(self, play: Play) -> None:
        assert self.case is not None
        await play.run(self.case)


def single(cases: st.SearchStrategy[Case]) -> st.SearchStrategy[Scenario]:
    return cases.map(lambda case: Single([], case.label, case))


def _message(method: str, params: dict[str, Any], caps: dict[str, Any], rid: Any) -> dict[str, Any]:
    info = {"name": "f", "version": "1"}
    meta = {META_VERSION: PROTOCOL_VERSION, META_CAPS: caps, META_INFO: info}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}


def _case(message: dict[str, Any], label: str, expect: Expect | None = None) -> Case:
    return Case(json.dumps(message).encode(), good_headers(message), expect=expect, label=label)


def mutate_token(token: str, how: str, salt: int) -> str:
    """``token`` changed in one of several ways (never left equal unless ``how`` is keep)."""
    if how == "keep" or not token:
        return token
    if how == "flip":
        i = salt % len(token)
        return token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1 :]
    if how == "truncate":
        return token[: salt % len(token)]
    if how == "append":
        return token + "A"
    if how == "kid":
        parts = token.split(".")
        return ".".join([parts[0], "k9", *parts[2:]]) if len(parts) > 2 else token + ".x"
    if how == "padding":
        return token + "="
    return token[::-1] if token[::-1] != token else token + "x"


STATE_MUTATIONS = ("keep", "keep", "flip", "truncate", "append", "kid", "padding", "reverse")
ACCEPT = {"action": "accept", "content": {"name": "Ada", "ok": True, "color": "red"}}
ANSWERS: dict[str, Any] = {
    "user_name": ACCEPT,
    "confirm": ACCEPT,
    "step1": ACCEPT,
    "step2": ACCEPT,
    "capital_question": {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "m",
    },
    "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hi"}, "model": "m"},
    "client_roots": {"roots": [{"uri": "file:///tmp"}]},
    "elicit_input": ACCEPT,
    "sample_input": {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"},
}
FULL_CAPS = {"elicitation": {}, "sampling": {}, "roots": {}}
TASK_INPUT_KEYS = {
    "confirm_delete": ("confirm-delete",),
    "multi_input": ("first-input", "second-input"),
    "test_tool_with_task": ("user_name",),
}
ANSWER_TASK = {"action": "accept", "content": {"confirm": True, "name": "Ada"}}


@dataclass
class MrtrScenario(Scenario):
    """Call an MRTR tool, then retry with real, forged or mutated answers and state."""

    tool: str = ""
    caps: dict[str, Any] = field(default_factory=dict)

    async def play(self, play: Play) -> None:
        first = _message("tools/call", {"name": self.tool}, self.caps, 1)
        _, response = await play.run(_case(first, "mrtr/call"))
        result = (response or {}).get("result") or {}
        bound_to: tuple[str, Any] = (self.tool, {})  # what the live state was issued for
        for step in self.steps:
            issued = result.get("requestState")
            if result.get("resultType") != "input_required" or not isinstance(issued, str):
                return
            params: dict[str, Any] = {"name": step["tool"] or self.tool}
            if step["arguments"] is not None:
                params["arguments"] = step["arguments"]
            asked = result.get("inputRequests") or {}
            answers = {k: ANSWERS.get(k, ACCEPT) for k in asked} if step["honest"] else {}
            answers.update(step["responses"])
            if answers or step["honest"]:
                params["inputResponses"] = answers
            state = mutate_token(issued, step["mutation"], step["salt"])
            if step["mutation"] != "drop":
                params["requestState"] = state
            message = _message("tools/call", params, self.caps, step["id"])
            expect = None
            # Another tool, or other arguments, is another binding (absent arguments and {}
            # are the same call).
            rebound = (params["name"], params.get("arguments") or {}) != bound_to
            if step["mutation"] != "drop" and (state != issued or rebound):
                why = "a forged, mutated or rebound requestState is refused"
                expect = Expect(frozenset({400}), frozenset({-32602}), why)
            _, response = await play.run(_case(message, "mrtr/retry", expect))
            if isinstance((response or {}).get("result"), dict):  # else: retry the old state
                result = response["result"]  # type: ignore[index]
                bound_to = (params["name"], params.get("arguments") or {})


@st.composite
def mrtr_scenarios(draw: st.DrawFn) -> Scenario:
    """Family "mrtr": MRTR round trips with answers and ``requestState`` random or forged."""
    tool = draw(st.sampled_from((*MRTR_TOOLS, "test_tool_with_task")))
    caps = draw(st.just(FULL_CAPS) | valid_capabilities())
    steps = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "tool": weighted((3, st.none()), (1, st.sampled_from(MRTR_TOOLS))),
                    "arguments": weighted((4, st.none()), (1, st.just({})), (1, json_objects)),
                    "honest": st.booleans(),
                    "responses": weighted(
                        (1, st.just({})),
                        (1, st.dictionaries(input_keys, input_response_values, max_size=2)),
                    ),
                    "mutation": st.sampled_from((*STATE_MUTATIONS, "drop")),
                    "salt": st.integers(0, 10_000),
                    "id": st.integers(-(2**63), 2**63) | st.text(max_size=8),
                }
            ),
            min_size=1,
            max_size=3,
        )
    )
    return MrtrScenario(steps, "mrtr", tool, caps)


@dataclass
class TaskScenario(Scenario):
    """Create a task, then get/update/cancel it (or ids like it) in random order."""

    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    caps: dict[str, Any] = field(default_factory=dict)

    async def play(self, play: Play) -> None:
        params: dict[str, Any] = {"name": self.tool, "arguments": self.arguments}
        if self.tool == "test_tool_with_task":
            params["inputResponses"] = {"user_name": ACCEPT}
        create = _message("tools/call", params, self.caps, "create")
        # 503: the store is full (max_stored_tasks_per_principal; finished tasks keep their
        # slot until their TTL), a documented, retryable refusal
        expect = Expect(frozenset({200, 503}), frozenset({None, -32603}), "a task-capable call")
        _, response = await play.run(_case(create, "tasks/create", expect))
        result = (response or {}).get("result") or {}
        real = result.get("taskId") if result.get("resultType") == "task" else None
        for step in self.steps:
            if step["pause"]:
                await trio.sleep(step["pause"])
            if step["which"] == "real" and isinstance(real, str):
                task_id: Any = real
            elif step["which"] == "mutated" and isinstance(real, str):
                task_id = mutate_token(real, step["mutation"], step["salt"])
            else:
                task_id = step["random"]
            caps = self.caps if step["declare"] else {}
            if step["op"] == "listen":
                await self._listen(play, task_id, real, caps, step)
                continue
            params = {"taskId": task_id}
            if step["op"] == "tasks/update":
                honest = {key: ANSWER_TASK for key in TASK_INPUT_KEYS.get(self.tool, ())}
                params["inputResponses"] = honest if step["honest"] else step["responses"]
            message = _message(step["op"], params, caps, step["id"])
            case = _case(message, step["op"])
            if not isinstance(task_id, str):  # no Mcp-Name can mirror it
                why = "a taskId that is not a string"
                case.expect = Expect(frozenset({400}), frozenset({-32020, -32602}), why)
            elif not step["declare"]:
                case.expect = Expect(frozenset({400}), frozenset({-32021}), "tasks undeclared")
            elif task_id != real:
                why = "an unknown taskId is refused"
                case.expect = Expect(frozenset({400}), frozenset({-32602}), why)
            elif step["op"] == "tasks/get":
                case.expect = Expect(frozenset({200}), frozenset({None}), "get of a live task")
            await play.run(case, partial(_same_task, real if task_id == real else None))

    async def _listen(
        self, play: Play, task_id: Any, real: str | None, caps: dict[str, Any], step: Any
    ) -> None:
        """Listen for the task's notifications: acknowledged with just the ids it may see."""
        params = {"notifications": {"taskIds": [task_id]}}
        case = _case(_message("subscriptions/listen", params, caps, step["id"]), "tasks/listen")
        size = len(task_id.encode()) if isinstance(task_id, str) else 0
        if not step["declare"]:
            case.expect = Expect(frozenset({400}), frozenset({-32021}), "tasks undeclared")
        elif not 0 < size <= 256:
            case.expect = Expect(frozenset({400}), frozenset({-32602}), "a bad taskIds filter")
        else:
            case.expect = Expect(frozenset({200}), frozenset(), "a listen stream")
        agreed = {"taskIds": [real]} if task_id == real and real is not None else {}
        await play.run(case, partial(_acknowledged, agreed))


def _acknowledged(agreed: dict[str, Any], answer: Answer, response: Any) -> list[str]:
    """A listen stream's acknowledgement names exactly the filter the server agreed to."""
    if not answer.hung_up:
        return []
    messages, _ = _parse_sse(answer.body, answer.complete)
    ack = messages[0].get("params", {}).get("notifications") if messages else None
    return [] if ack == agreed else [f"acknowledged {ack!r}, expected {agreed!r}"]


def _same_task(real: str | None, answer: Answer, response: dict[str, Any] | None) -> list[str]:
    """A ``tasks/get`` of a task this scenario created answers that very task."""
    result = (response or {}).get("result")
    if real is None or not isinstance(result, dict) or "status" not in result:
        return []
    if result.get("taskId") != real:
        return [f"tasks/get of {real!r} answered task {result.get('taskId')!r}"]
    if result["status"] not in ("working", "input_required", "completed", "failed", "cancelled"):
        return [f"task status {result['status']!r} is not a task status"]
    return []


@st.composite
def task_steps(draw: st.DrawFn) -> dict[str, Any]:
    """One step on a task: what to do, to which id, declaring the extension or not (only
    what the step uses is drawn)."""
    op = draw(st.sampled_from(["tasks/get", "tasks/update", "tasks/cancel", "listen"]))
    which = draw(st.sampled_from(["real", "real", "real", "mutated", "random"]))
    honest = op == "tasks/update" and draw(st.booleans())
    return {
        "op": op,
        "which": which,
        "honest": honest,
        "mutation": draw(st.sampled_from(STATE_MUTATIONS[2:])) if which == "mutated" else "",
        "salt": draw(st.integers(0, 1000)) if which == "mutated" else 0,
        "random": draw(task_ids) if which == "random" else None,
        "declare": not draw(one_in(4)),
        "responses": draw(input_responses) if op == "tasks/update" and not honest else {},
        "pause": draw(st.sampled_from([0, 0, 0, 0.002])),
        "id": draw(st.integers(0, 2**40) | st.text(max_size=6)),
    }


@st.composite
def task_scenarios(draw: st.DrawFn) -> Scenario:
    """Family "tasks": task lifecycles with real, mutated and random task ids."""
    tool = draw(st.sampled_from((*TASK_TOOLS, "test_tool_with_task")))
    arguments = draw(
        st.just({})
        if tool != "slow_compute"
        else st.fixed_dictionaries({"seconds": st.sampled_from([0, 0.001, 0.02, 3600])})
    )
    if tool == "confirm_delete":
        arguments = {"filename": draw(st.text(max_size=8))}
    caps = {"extensions": {TASKS: {}}, **draw(st.just(FULL_CAPS) | valid_capabilities())}
    steps = draw(st.lists(task_steps(), min_size=1, max_size=4))
    return TaskScenario(steps, "tasks", tool, arguments, caps)


@dataclass
class ListenScenario(Scenario):
    """Hold a listen stream open, change lists, and see exactly the news that was asked for.

    The stream must be acknowledged with the agreed filter, then carry a notification of
    every kind it agreed to and that changed (identical news may coalesce), and nothing
    else: never a notification type the client did not ask for.
    """

    flags: dict[str, Any] = field(default_factory=dict)
    triggers: list[str] = field(default_factory=list)

    async def play(self, play: Play) -> None:
        agreed = {flag for flag, wanted in self.flags.items() if wanted is True}
        expected = {TRIGGERED[t] for t in self.triggers if FLAG_OF[TRIGGERED[t]] in agreed}

        tap = Tap()

        def heard_all(messages: list[Any]) -> bool:
            if expected <= {m.get("method") for m in messages if isinstance(m, dict)}:
                tap.done.set()  # (set as well when the stream is over)
            return False  # stay on: whatever else comes must be judged too

        tap.until = heard_all

        params = {"notifications": self.flags}
        case = _case(_message("subscriptions/listen", params, {}, "listen"), "listen/stream")
        check = None
        if all(isinstance(v, bool) for v in self.flags.values()):
            case.expect = Expect(frozenset({200}), frozenset(), "a listen stream")
            check = partial(_listened, agreed, expected)
        else:  # SubscriptionFilter flags are booleans
            case.expect = Expect(frozenset({400}), frozenset({-32602}), "a filter of junk")
        case.tap = tap
        async with trio.open_nursery() as nursery:
            nursery.start_soon(play.run, case, check)
            with trio.move_on_after(5):
                await tap.first.wait()
            for tool in self.triggers:
                call = _message("tools/call", {"name": tool}, {}, tool)
                await play.run(_case(call, "listen/trigger", OK))
            with trio.move_on_after(5):
                await tap.done.wait()
            # Every change was published before its call answered; once all tasks are
            # blocked, the stream has written all it ever will about them.
            with trio.move_on_after(5):
                await trio.testing.wait_all_tasks_blocked()
            tap.stop.set()


TRIGGERED = {
    "test_trigger_tool_change": "notifications/tools/list_changed",
    "test_trigger_prompt_change": "notifications/prompts/list_changed",
}
FLAG_OF = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}
OK = Expect(frozenset({200}), frozenset({None}), "a valid call")


def _listened(
    agreed: set[str], expected: set[str], answer: Answer, response: dict[str, Any] | None
) -> list[str]:
    messages, _ = _parse_sse(answer.body, answer.complete)
    if not messages:
        return ["a listen stream without its acknowledgement"]
    problems = []
    ack = messages[0].get("params", {}).get("notifications")
    if set(ack or {}) != agreed or not all(v is True for v in (ack or {}).values()):
        problems.append(f"acknowledged {ack!r}, the server serves {sorted(agreed)}")
    news = [m for m in messages[1:] if isinstance(m, dict)]
    heard = {m.get("method") for m in news}
    for method in heard:
        if FLAG_OF.get(str(method)) not in agreed:
            problems.append(f"sent {method}, which the client did not ask for")
    if any(m.get("params", {}).get("_meta", {}).get(META_SUBSCRIPTION) != "listen" for m in news):
        problems.append("a notification without the stream's subscriptionId")
    if not expected <= heard:
        problems.append(f"never heard {sorted(expected - heard)} after the change")
    return problems


@st.composite
def listen_scenarios(draw: st.DrawFn) -> Scenario:
    """Family "listen": listen filters (flags true, false or junk) and list changes."""
    flags = draw(
        st.fixed_dictionaries(
            {},
            optional={
                flag: weighted((4, st.just(True)), (2, st.booleans()), (1, json_scalars))
                for flag in ("toolsListChanged", "promptsListChanged", "resourcesListChanged")
            },
        )
    )
    triggers = draw(st.lists(st.sampled_from(sorted(TRIGGERED)), max_size=3))
    return ListenScenario([], "listen", flags, triggers)


@dataclass
class Together(Scenario):
    """Several scenarios at once, on one server: every answer is judged as if alone."""

    parts: list[Scenario] = field(default_factory=list)

    async def play(self, play: Play) -> None:
        async with trio.open_nursery() as nursery:
            for part in self.parts:
                nursery.start_soon(part.play, play)


def concurrent_scenarios() -> st.SearchStrategy[Scenario]:
    """Family "concurrent": valid, random, MRTR and task scenarios in flight together."""
    part = weighted(
        (3, single(valid_cases())),
        (2, single(rpc_cases())),
        (1, mrtr_scenarios()),
        (2, task_scenarios()),
    )
    return st.lists(part, min_size=2, max_size=3).map(lambda p: Together([], "concurrent", p))


# ====================================================================== families


@st.composite
def slow_body_cases(draw: st.DrawFn) -> Case:
    """Family "slowbody" (an app with a 10 ms body timeout): bodies that stop arriving.

    Mostly a valid request from a correct client, sometimes any JSON-RPC-shaped message or
    another HTTP method; in chunks, and half the time the client stops sending half-way.
    """
    if draw(one_in(4)):
        message = draw(rpc_messages())
        headers, admission = draw(header_sets(message))
    else:
        message = draw(valid_messages())
        headers, admission = good_headers(message), "allowed"
    body = to_json(message).encode()
    cuts = tuple(draw(st.lists(st.integers(0, len(body)), min_size=1, max_size=3)))
    method = "POST" if not draw(one_in(6)) else draw(http_methods)
    case = Case(body, headers, method, admission=admission, cuts=cuts, label="slowbody")
    chunks = len(_chunks(body, cuts))
    stall = draw(one_in(3))  # else the whole body arrives, in chunks, well within time
    case.stall_after = draw(st.integers(0, chunks - 1)) if stall else chunks
    return case


#: Options a family's app is built with (the default: ``server.asgi_app()`` as it is).
APP_OPTIONS: dict[str, dict[str, Any]] = {
    "slowbody": {"timeouts": Timeouts(body=SLOW_BODY_TIMEOUT)}
}

#: The families of the older era's sessions (tests/fuzz/sessions.py): each built on a server
#: of their own (``server_options``), and starting no background work that outlives them.
SESSION_FAMILIES = ("sessions", "pushes")


def _sessions() -> Any:
    from . import sessions  # imported when used: it builds on this module

    return sessions


def server_options(family: str) -> dict[str, Any]:
    """Options a family's fixture server is built with (the default: as it is)."""
    return dict(_sessions().SERVER_OPTIONS) if family in SESSION_FAMILIES else {}


FAMILIES: dict[str, Callable[[], st.SearchStrategy[Scenario]]] = {
    "rpc": lambda: single(rpc_cases()),
    "raw": lambda: single(raw_cases()),
    "http": lambda: single(http_cases()),
    "valid": lambda: single(valid_cases()),
    "mrtr": mrtr_scenarios,
    "tasks": task_scenarios,
    "listen": listen_scenarios,
    "concurrent": concurrent_scenarios,
    "slowbody": lambda: single(slow_body_cases()),
    "sessions": lambda: _sessions().session_scenarios(),
    "pushes": lambda: _sessions().push_scenarios(),
}


# ====================================================================== the harness


#: The exchange being played in this task (and the tasks and threads it starts): log
#: records carry it, so concurrent exchanges each get their own records.
_EXCHANGE: ContextVar[object | None] = ContextVar("fuzz_exchange", default=None)


class _Capture(logging.Handler):
    """ERROR records, by the exchange whose work logged them (None: background work)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: dict[object | None, list[logging.LogRecord]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.records.setdefault(_EXCHANGE.get(), []).append(record)

    def drain(self, exchange: object) -> list[logging.LogRecord]:
        """The records of ``exchange``, and any that no exchange owns."""
        return self.records.pop(exchange, []) + self.records.pop(None, [])


@dataclass
class Stats:
    """The figures of a run: what was sent, what came back, and what was wrong."""

    cases: int = 0
    scenarios: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)
    families: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    failure_count: int = 0
    tracebacks: int = 0
    error_logs: int = 0
    five_hundreds: list[str] = field(default_factory=list)
    five_hundred_count: int = 0
    hung_up: int = 0
    slowest: float = 0.0
    slowest_case: str = ""

    def merge(self, other: Stats) -> None:
        for name in ("cases", "scenarios", "failure_count", "tracebacks", "error_logs"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.five_hundred_count += other.five_hundred_count
        self.hung_up += other.hung_up
        self.statuses.update(other.statuses)
        self.codes.update(other.codes)
        self.families.update(other.families)
        self.failures += other.failures[: max(0, 50 - len(self.failures))]
        self.five_hundreds += other.five_hundreds[: max(0, 20 - len(self.five_hundreds))]
        if other.slowest > self.slowest:
            self.slowest, self.slowest_case = other.slowest, other.slowest_case


class FuzzFailure(AssertionError):
    """The oracle found a problem (raised in the suite so Hypothesis can shrink it)."""


@dataclass
class Harness(Play):
    """Plays scenarios against one running app, checks every answer, keeps the figures."""

    app: Any
    client: Client
    capture: _Capture
    stats: Stats
    raise_failures: bool = True
    limit: float = 10.0
    background: int | None = None  # the run's background work, for a family that adds none

    async def run(
        self, case: Case, more: Callable[[Answer, dict[str, Any] | None], list[str]] | None = None
    ) -> tuple[Answer, dict[str, Any] | None]:
        mine = object()
        token = _EXCHANGE.set(mine)
        try:
            answer = await exchange(self.app, case, limit=self.limit)
            await trio.lowlevel.checkpoint()
        finally:
            _EXCHANGE.reset(token)
        records = self.capture.drain(mine)
        judge = check if case.oracle is None else case.oracle
        problems = judge(case, answer, self.client, records)
        if more is not None:
            problems += more(answer, _response_of(answer))
        self._count(case, answer, records, problems)
        if problems:
            self._fail(
                [
                    "fuzz failure:",
                    *(f"- {p}" for p in problems),
                    case.describe(),
                    f"=> {answer.status} {answer.headers!r}",
                    f"   {answer.body[:1500]!r}",
                ]
            )
        return answer, _response_of(answer)

    async def unchecked(self, case: Case) -> Answer:
        return await exchange(self.app, case, limit=self.limit)

    def _fail(self, lines: list[str]) -> None:
        report = "\n".join(lines)
        self.stats.failure_count += 1
        if len(self.stats.failures) < 50:
            self.stats.failures.append(report)
        if self.raise_failures:
            raise FuzzFailure(report)

    def settled(self, scenario: Scenario) -> None:
        """After a scenario, nothing it did is still held: no listener on the run's bus, no
        pushed request waiting, no session request running, no background work left (where
        the family starts none that outlives it: ``background``)."""
        runtime = self.app.runtime
        assert runtime is not None
        problems = []
        if runtime.bus.listener_count:
            problems.append(f"{runtime.bus.listener_count} bus listener(s) still held")
        if runtime.sessions is not None:
            signals = runtime.sessions.signals
            for name in ("_pending", "_pushes", "_running"):
                if getattr(signals, name):
                    problems.append(f"session signals {name} still holds {getattr(signals, name)}")
        if self.background is not None and runtime.background_count != self.background:
            problems.append(
                f"{runtime.background_count} background tasks, {self.background} before"
            )
        if problems:
            self._fail(["held after the scenario:", *(f"- {p}" for p in problems), repr(scenario)])

    def _count(
        self, case: Case, answer: Answer, records: list[logging.LogRecord], problems: list[str]
    ) -> None:
        stats = self.stats
        stats.cases += 1
        stats.statuses[answer.status] += 1
        stats.hung_up += answer.hung_up
        if answer.elapsed > stats.slowest:
            stats.slowest = answer.elapsed
            stats.slowest_case = f"{case.label} {case.envelope.method or ''}".strip()
        stats.tracebacks += sum(1 for r in records if r.exc_info)
        stats.error_logs += len(records)
        response = _response_of(answer)
        if response is not None and isinstance(response.get("error"), dict):
            stats.codes[str(response["error"].get("code"))] += 1
        elif response is not None:
            stats.codes["result"] += 1
        if answer.status == 500:
            stats.five_hundred_count += 1
            if len(stats.five_hundreds) < 20:
                stats.five_hundreds.append(f"{case.describe()}\n=> {answer.body[:300]!r}")


def _response_of(answer: Answer) -> dict[str, Any] | None:
    ctype = answer.header(b"content-type") or ""
    messages: list[Any] = []
    if ctype.startswith("text/event-stream"):
        messages, _ = _parse_sse(answer.body, answer.complete)
    elif ctype == "application/json" and answer.body:
        try:
            messages = [json.loads(answer.body)]
        except ValueError:
            return None
    for message in messages:
        if isinstance(message, dict) and "method" not in message:
            return message
    return None


def hypothesis_settings(examples: int, *, shrink: bool) -> settings:
    phases = [Phase.explicit, Phase.generate, *([Phase.shrink] if shrink else [])]
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )


async def run_family(
    family: str,
    examples: int,
    *,
    seed: int | None = None,
    raise_failures: bool = True,
    limit: float = 10.0,
) -> Stats:
    """Run ``examples`` scenarios of ``family`` against one run of a fresh fixture server.

    Hypothesis draws in a worker thread; every exchange is played on this trio loop, so
    one server run serves every example (as a deployed server does). With
    ``raise_failures`` the first problem fails (and Hypothesis shrinks it); without, every
    problem is counted and the run goes on.
    """
    server = build_server(**server_options(family))
    app = server.asgi_app(**APP_OPTIONS.get(family, {}))
    capture = _Capture()
    stats = Stats()
    root = logging.getLogger()  # every record reaches it: presa_trio sets no propagate=False
    root.addHandler(capture)
    strategy = FAMILIES[family]()
    failure: Exception | None = None
    try:
        async with app.lifespan():
            harness = Harness(app, Client(app), capture, stats, raise_failures, limit)
            if family in SESSION_FAMILIES:
                assert app.runtime is not None
                harness.background = app.runtime.background_count

            def one(scenario: Scenario) -> None:
                stats.scenarios += 1
                stats.families[family] += 1
                trio.from_thread.run(scenario.play, harness)
                trio.from_thread.run_sync(harness.settled, scenario)

            test = given(strategy)(one)
            test = hypothesis_settings(examples, shrink=raise_failures)(test)
            if seed is not None:
                test = hypothesis_seed(seed)(test)
            try:
                await trio.to_thread.run_sync(test)
            except Exception as exc:  # raised below, not wrapped in the run's nursery group
                failure = exc
    finally:
        root.removeHandler(capture)
    if failure is not None:
        raise failure
    return stats
