"""``presa-trio list``, ``call`` and ``read``: a client on the command line.

It parses the command line, opens the target (a URL, ``MODULE:SERVER`` served in this
process, or a spawned ``--stdio`` command), asks the person (or ``--answer``, or stdin) what
the server asks for, and prints results; the protocol lives in ``presa_trio._client``.
Exit status: 0 done, 1 the tool's result is an error (or its task failed or was cancelled),
2 a bad command line or argument, 3 the server could not be reached or answered a protocol
error, or the command ran out of ``--timeout``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._client.connection import Connection

OK, TOOL_ERROR, USAGE, FAILURE = 0, 1, 2, 3
DEFAULT_TIMEOUT = 60.0

CLIENT_HELP = """\
TARGET is a server: an http(s):// URL (Streamable HTTP), MODULE:SERVER (a presa_trio server
served in this process, lifespan and all), or --stdio -- COMMAND ARGS... (a server process
spawned here, spoken to on its stdin/stdout). The client speaks 2026-07-28 and falls back to
an initialize session when the server only speaks the older protocol.

Exit status: 0 done, 1 the tool's result is an error (isError, or its task failed or was
cancelled), 2 a bad command line or argument, 3 the server could not be reached or answered a
protocol error, or --timeout ran out.
"""

CALL_HELP = (
    CLIENT_HELP
    + """
KEY=VALUE arguments are typed by the tool's input schema (count=3 is a number where the
schema says integer; arrays and objects are JSON); --args JSON gives them as one object, and
KEY=VALUE pairs override it. A tool that runs as a task is followed to its end, its status
and progress on stderr. When the server asks a question (an elicitation), the answer comes
from --answer KEY=JSON, else from the terminal, else from the next line of stdin (JSON: the
answer's content, or a whole {"action": ...} result).
"""
)


def add_parsers(commands: Any) -> None:
    """Add ``list``, ``call`` and ``read`` to the ``presa-trio`` subparsers."""
    formatter = argparse.RawDescriptionHelpFormatter
    listing = commands.add_parser(
        "list", help="list a server's tools, resources or prompts", description=CLIENT_HELP,
        formatter_class=formatter,
    )  # fmt: skip
    listing.add_argument("words", nargs="*", metavar="TARGET", help="URL or MODULE:SERVER")
    kind = listing.add_mutually_exclusive_group()
    kind.add_argument("--resources", action="store_true", help="list resources and templates")
    kind.add_argument("--prompts", action="store_true", help="list prompts")
    call = commands.add_parser(
        "call", help="call a tool", description=CALL_HELP, formatter_class=formatter
    )
    call.add_argument("words", nargs="*", metavar="TARGET TOOL [KEY=VALUE ...]")
    call.add_argument("--args", metavar="JSON", help="the arguments as one JSON object")
    call.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="the answer to the question named KEY (repeatable)",
    )
    read = commands.add_parser(
        "read", help="read a resource", description=CLIENT_HELP, formatter_class=formatter
    )
    read.add_argument("words", nargs="*", metavar="TARGET URI")
    for parser in (listing, call, read):
        parser.add_argument("--stdio", action="store_true", help="spawn the server: -- CMD ARGS")
        parser.add_argument("--json", action="store_true", help="print the raw JSON")
        parser.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_TIMEOUT,
            metavar="S",
            help=f"give up after S seconds, questions included (default {DEFAULT_TIMEOUT:g})",
        )


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``argv`` before ``--`` (for argparse) and the spawned command after it, when a client
    command has ``--stdio``."""
    items = list(argv)
    if items and items[0] in ("list", "call", "read") and "--stdio" in items and "--" in items:
        at = items.index("--")
        return items[:at], items[at + 1 :]
    return items, []


def run(
    args: argparse.Namespace, extra: list[str], command: list[str], load: Callable[[str], Any]
) -> int:
    """Run ``list``/``call``/``read``; the exit status. Every failure is one line on stderr.
    ``extra`` are the words argparse left (``KEY=VALUE`` after an option), ``command`` the
    one after ``--``, and ``load`` imports MODULE:SERVER (``presa-trio serve``'s loader)."""
    import trio

    from ._client.arguments import parse_json_object

    try:
        unknown = [word for word in extra if word.startswith("-")]
        if unknown:
            raise UsageError(f"unrecognized arguments: {' '.join(unknown)}")
        args.words = [*args.words, *extra]
        target, rest = _target(args, command)
        _check_rest(args.command, rest)
        if args.command == "call":  # a bad --args is refused before any server starts
            args.base = parse_json_object(args.args, "--args") if args.args is not None else {}
        if isinstance(target, str) and not target.startswith(("http://", "https://")):
            target = _in_process(target, load)
        return trio.run(partial(_main, args, target, rest))
    except BaseException as exc:
        leaf = _sole(exc)
        outcome = _outcome(leaf)
        if outcome is None:
            raise
        return _fail(*outcome)


def _sole(exc: BaseException) -> BaseException:
    """The one exception a nursery wrapped in groups (the exception itself when it is not
    a group, or a group of several)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _outcome(exc: BaseException) -> tuple[int, str] | None:
    """The exit status and line for a failure this command explains; None for a bug."""
    from ._client.arguments import ArgumentError
    from ._client.connection import TaskEnded
    from ._client.transports import TransportError
    from ._client.wire import ProtocolError

    if isinstance(exc, UsageError | ArgumentError):
        return USAGE, str(exc)
    if isinstance(exc, TaskEnded):
        return TOOL_ERROR, str(exc)
    if isinstance(exc, TransportError | ProtocolError):
        return FAILURE, str(exc)
    if isinstance(exc, TimedOut):
        return FAILURE, str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return 130, "interrupted"
    return None


class UsageError(Exception):
    """A command line that names no target, tool or URI."""


def _fail(status: int, line: str) -> int:
    print(f"presa-trio: {line}", file=sys.stderr)
    return status


def _target(args: argparse.Namespace, command: list[str]) -> tuple[Any, list[str]]:
    words = list(args.words)
    if args.stdio:
        if not command:
            raise UsageError("--stdio needs the server's command after --: --stdio -- CMD ARGS")
        return command, words
    if command:
        raise UsageError("a command after -- needs --stdio")
    if not words:
        raise UsageError("name a TARGET: an http(s):// URL, MODULE:SERVER, or --stdio -- CMD")
    return words[0], words[1:]


def _check_rest(command: str, rest: list[str]) -> None:
    """What follows the target fits the command (checked before any server is started)."""
    if command == "list" and rest:
        raise UsageError(f"list takes only a TARGET, not {rest[0]!r}")
    if command == "read" and len(rest) != 1:
        raise UsageError("read takes a TARGET and one URI")
    if command == "call" and not rest:
        raise UsageError("call needs a TOOL after the TARGET")


async def _main(args: argparse.Namespace, target: Any, rest: list[str]) -> int:
    import trio

    from ._client.connection import Connection

    asker = Asker(_answers(args))
    connection: Connection | None = None
    try:
        with trio.fail_after(args.timeout):
            async with _open(target) as transport:
                connection = await Connection.open(transport, asker, _report)
                try:
                    return await _command(args, connection, rest)
                finally:
                    await connection.close()
    except trio.TooSlowError:
        task = connection.task_id if connection is not None else None
        if task is None:
            still = ""
        elif isinstance(target, str):
            still = f" (task {task} goes on on the server)"
        else:
            still = f" (task {task} stopped with the server)"
        raise TimedOut(f"no answer within --timeout {args.timeout:g} seconds{still}") from None


class TimedOut(Exception):
    """``--timeout`` ran out."""


@asynccontextmanager
async def _open(target: Any) -> AsyncIterator[Any]:
    from ._client.transports import HttpTransport, open_in_process, open_spawned

    if isinstance(target, list):
        async with open_spawned(target) as spawned:
            yield spawned
    elif isinstance(target, str):
        yield HttpTransport(target)
    else:
        async with open_in_process(target) as served:
            yield served


def _in_process(spec: str, load: Callable[[str], Any]) -> Any:
    from ._server import Server
    from ._transports.asgi import AsgiApp

    if ":" not in spec:
        raise UsageError(f"{spec!r} is neither an http(s):// URL nor MODULE:SERVER")
    try:
        served = load(spec)
    except SystemExit as exc:  # load_target's one-line refusal
        raise UsageError(str(exc).removeprefix("presa-trio: ")) from None
    except Exception as exc:  # the module itself failed as it was imported
        module = spec.partition(":")[0]
        raise UsageError(f"importing {module!r} failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(served, Server | AsgiApp):
        raise UsageError(f"{spec} is a {type(served).__name__}, not a presa_trio Server")
    return served


def _report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _command(args: argparse.Namespace, connection: Connection, rest: list[str]) -> int:
    if args.command == "list":
        return await _list(args, connection)
    if args.command == "read":
        result = await connection.with_rounds("resources/read", {"uri": rest[0]})
        print(json.dumps(result, indent=2) if args.json else _contents_text(result))
        return OK
    return await _call(args, connection, rest)


async def _list(args: argparse.Namespace, connection: Connection) -> int:
    if args.resources:
        found = {"resources": await connection.list_all("resources/list", "resources")}
        found["resourceTemplates"] = await connection.list_all(
            "resources/templates/list", "resourceTemplates"
        )
        if args.json:
            print(json.dumps(found, indent=2))
        else:
            print(_resources_text(found["resources"], found["resourceTemplates"]))
        return OK
    method, key = ("prompts/list", "prompts") if args.prompts else ("tools/list", "tools")
    items = await connection.list_all(method, key)
    if args.json:
        print(json.dumps(items, indent=2))
    else:
        print(
            "\n".join(_tool_text(item) if key == "tools" else _prompt_text(item) for item in items)
        )
    return OK


async def _call(args: argparse.Namespace, connection: Connection, rest: list[str]) -> int:
    from ._client.arguments import parse_pairs

    name, pairs = rest[0], rest[1:]
    tools = {tool.get("name"): tool for tool in await connection.list_all("tools/list", "tools")}
    tool = tools.get(name)
    if tool is None:
        known = ", ".join(sorted(map(str, tools))) or "none"
        raise UsageError(f"the server has no tool {name!r} (it has: {known})")
    given = tool.get("inputSchema")
    schema: dict[str, Any] = given if isinstance(given, dict) else {}
    arguments = parse_pairs(pairs, schema, args.base)
    params = {"name": name, "arguments": arguments}
    result = await connection.with_rounds("tools/call", params, input_schema=schema)
    if args.json:
        structured = result.get("structuredContent")
        print(json.dumps(result if structured is None else structured, indent=2))
    else:
        text = _content_text(result.get("content") or [])
        if text:
            print(text)
    if result.get("isError") is True:
        if args.json or not text:
            print("presa-trio: the tool answered an error", file=sys.stderr)
        return TOOL_ERROR
    return OK


# ---------------------------------------------------------------------------- answers


def _answers(args: argparse.Namespace) -> dict[str, Any]:
    from ._client.arguments import ArgumentError

    given: dict[str, Any] = {}
    for item in getattr(args, "answer", []):
        key, equals, text = item.partition("=")
        if not equals or not key:
            raise ArgumentError(f"--answer expects KEY=JSON, got {item!r}")
        try:
            given[key] = json.loads(text)
        except ValueError as exc:
            raise ArgumentError(f"--answer {key}: not JSON: {exc}") from None
    return given


def as_result(value: Any) -> dict[str, Any]:
    """An answer as an ``ElicitResult``: a whole ``{"action": ...}`` object as it is, any
    other value the content of an accepted answer (an empty answer cancels)."""
    if isinstance(value, dict) and "action" in value:
        return value
    if value is None:
        return {"action": "cancel"}
    return {"action": "accept", "content": value}


class Asker:
    """Answers a server's questions: from ``--answer``, else the terminal, else stdin lines."""

    def __init__(self, given: Mapping[str, Any]) -> None:
        self.given = dict(given)

    async def answer(self, key: str, request: Mapping[str, Any]) -> dict[str, Any]:
        import trio

        params = request.get("params") or {}
        if key in self.given:
            await trio.lowlevel.checkpoint()
            return as_result(self.given.pop(key))
        _report(f"the server asks ({key}): {params.get('message', '')}")
        if params.get("mode") == "url":
            _report(f"  open {params.get('url')}")
        if sys.stdin.isatty():
            return await self._prompt(params)
        line = await _read_line()
        if not line.strip():
            return {"action": "cancel"}
        try:
            return as_result(json.loads(line))
        except ValueError:
            from ._client.arguments import ArgumentError

            raise ArgumentError(f"the answer on stdin is not JSON: {line.strip()[:80]!r}") from None

    async def _prompt(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Ask on the terminal, field by field; end of input declines."""
        import trio

        from ._client.arguments import ArgumentError, coerce

        await trio.lowlevel.checkpoint()
        if params.get("mode") == "url":
            line = await _ask("  accept? [y/N] ")
            return {"action": "accept" if line.strip().lower() in ("y", "yes") else "decline"}
        schema = params.get("requestedSchema") or {}
        required = set(schema.get("required") or ())
        content: dict[str, Any] = {}
        for name, prop in (schema.get("properties") or {}).items():
            kind = prop.get("type", "string")
            choices = prop.get("enum")
            hint = f" {'/'.join(map(str, choices))}" if choices else ""
            while True:
                line = await _ask(
                    f"  {name} ({kind}{hint}){'' if name in required else ' [optional]'}: "
                )
                if line == "":  # end of input
                    return {"action": "decline"}
                text = line.rstrip("\n")
                if not text and name not in required:
                    break
                try:
                    content[name] = coerce(name, text, prop)
                    break
                except ArgumentError as exc:
                    _report(f"  {exc}")
        return {"action": "accept", "content": content}


async def _ask(prompt: str) -> str:
    print(prompt, end="", file=sys.stderr, flush=True)
    return await _read_line()


async def _read_line() -> str:
    """One line of stdin (empty at its end), in a thread the timeout can walk away from."""
    import trio

    return await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)


# ---------------------------------------------------------------------------- printing


def _content_text(blocks: Sequence[Any]) -> str:
    lines = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            lines.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            size = len(str(block.get("data", ""))) * 3 // 4
            lines.append(f"[{kind} {block.get('mimeType', '?')}, {size} bytes]")
        elif kind == "resource":
            inner = block.get("resource") or {}
            lines.append(str(inner.get("text", f"[resource {inner.get('uri', '?')}]")))
        elif kind == "resource_link":
            lines.append(f"[link {block.get('uri', '?')}]")
    return "\n".join(lines)


def _contents_text(result: Mapping[str, Any]) -> str:
    lines = []
    for item in result.get("contents") or []:
        if "text" in item:
            lines.append(str(item["text"]))
        else:
            size = len(str(item.get("blob", ""))) * 3 // 4
            lines.append(f"[blob {item.get('mimeType', '?')}, {size} bytes]")
    return "\n".join(lines)


def _first_line(text: Any) -> str:
    return str(text or "").strip().split("\n", 1)[0]


def _tool_text(tool: Mapping[str, Any]) -> str:
    """``name(arg: type, arg: type = default, arg: type?)`` and the description's first line."""
    from ._client.arguments import type_label

    schema = tool.get("inputSchema") or {}
    required = set(schema.get("required") or ())
    parts = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        part = f"{name}: {type_label(prop)}"
        if "default" in prop:
            part += f" = {json.dumps(prop['default'])}"
        elif name not in required:
            part += "?"
        parts.append(part)
    line = f"{tool.get('name')}({', '.join(parts)})"
    description = _first_line(tool.get("description"))
    return f"{line}\n    {description}" if description else line


def _prompt_text(prompt: Mapping[str, Any]) -> str:
    parts = [
        f"{a.get('name')}" + ("" if a.get("required") else "?")
        for a in prompt.get("arguments") or []
        if isinstance(a, dict)
    ]
    line = f"{prompt.get('name')}({', '.join(parts)})"
    description = _first_line(prompt.get("description"))
    return f"{line}\n    {description}" if description else line


def _resources_text(resources: Sequence[Any], templates: Sequence[Any]) -> str:
    lines = []
    for item in [*resources, *templates]:
        uri = item.get("uri") or item.get("uriTemplate")
        mime = f" ({item['mimeType']})" if item.get("mimeType") else ""
        lines.append(f"{uri}{mime}  {item.get('name', '')}".rstrip())
        description = _first_line(item.get("description"))
        if description:
            lines.append(f"    {description}")
    return "\n".join(lines)
