"""What a server serves: the ``Registry`` of tools, resources, resource templates, prompts and
completers, and how each entry is called (spec 2026-07-28 server/tools.mdx, resources.mdx,
prompts.mdx, utilities/completion.mdx).

Each entry knows its wire description and calls its handler through its ``Signature``; what a
return value becomes is ``_handlers.results``'. Routing, admission and errors-to-responses live
in the dispatcher; the decorators that fill a registry live on ``Server``.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, final

import jsonschema_rs
import trio

from .._handlers.convert import ArgumentError, to_jsonable
from .._handlers.results import (
    ToolResult,
    call_result,
    content_of,
    contents_of,
    error_result,
    messages_of,
    structured_result,
)
from .._protocol.headers import HeaderParam, header_params_of
from .._protocol.tokens import check_scopes
from ..errors import InvalidParams, ToolError
from .context import Context
from .signature import Handler, Signature, call_sync, thread_limiter

MAX_COMPLETIONS = 100

logger = logging.getLogger("presa_trio")

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def _no_remote_refs(uri: str) -> Any:
    raise ValueError(f"remote $ref {uri!r} is not dereferenced (spec basic/index.mdx)")


def compile_argument_schema(schema: Mapping[str, Any]) -> Any:
    """A validator for tool arguments; remote ``$ref`` is never fetched."""
    try:
        return jsonschema_rs.validator_for(dict(schema), retriever=_no_remote_refs)
    except Exception as exc:  # invalid or unsupported-dialect schemas fail at declaration
        raise ValueError(f"invalid inputSchema: {exc}") from None


@final
@dataclass(slots=True)
class Tool:
    """One tool: its wire description, its argument validators and how to call it.

    ``options`` holds settings that extensions read (a task policy); the core ignores them.
    ``thread`` runs a sync handler in a worker thread (the default; see ``Signature.call``).
    ``scopes`` are the OAuth scopes a call needs over HTTP (``presa_trio.auth``).
    ``lax``: the inputSchema was derived from the signature, so arguments that fail it get
    pydantic's lax second chance (``"5"`` for an ``int``; see ``bind``). ``wrap_output``:
    results are sent as ``{"result": value}`` (a derived outputSchema for a non-object type).
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    signature: Signature
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    thread: bool = True
    scopes: tuple[str, ...] = ()
    lax: bool = False
    wrap_output: bool = False
    header_params: tuple[HeaderParam, ...] = ()
    validator: Any = None
    output_validator: Any = None
    wire: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _TOOL_NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-128 characters of [A-Za-z0-9_.-]")
        if self.input_schema.get("type") != "object":
            raise ValueError(f"inputSchema of {self.name!r} must have type 'object' at its root")
        self.scopes = check_scopes(self.scopes)
        self.header_params = header_params_of(self.input_schema)
        self.validator = compile_argument_schema(self.input_schema)
        if self.output_schema is not None:
            self.output_validator = compile_argument_schema(self.output_schema)
        wire: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            wire["title"] = self.title
        wire["description"] = self.description
        wire["inputSchema"] = self.input_schema  # verbatim: keywords must survive (SEP-2106)
        for key, value in (
            ("outputSchema", self.output_schema),
            ("annotations", self.annotations),
            ("icons", self.icons),
            ("_meta", self.meta),
        ):
            if value is not None:
                wire[key] = value
        self.wire = wire

    def bind(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The handler's keyword arguments, each as its parameter is hinted; ArgumentError
        when the arguments fail the inputSchema or do not convert.

        Arguments that fail a derived inputSchema are converted in pydantic's lax mode, then
        checked against the schema again (keywords pydantic does not know, ``Param(extra=)``,
        still hold). Either way a failure is the tool's input error, never -32603.
        """
        binder = self.signature.binder
        if self.validator.is_valid(arguments):
            return binder.from_json(arguments)
        if not (self.lax and binder.can_convert):
            raise ArgumentError(self._schema_errors(arguments))
        converted = binder.from_lax_json(arguments)
        written = binder.to_json(converted)
        if not self.validator.is_valid(written):
            raise ArgumentError(self._schema_errors(written))
        return converted

    def argument_errors(self, arguments: Mapping[str, Any]) -> list[str]:
        """What ``bind`` finds wrong with ``arguments`` (empty when they bind)."""
        try:
            self.bind(arguments)
        except ArgumentError as exc:
            return exc.problems
        return []

    def bound(self, arguments: Mapping[str, Any]) -> BoundArguments | list[str]:
        """``arguments`` bound now, once, for a later ``call`` of this tool, which then
        binds nothing; or what ``bind`` finds wrong with them (never an empty list). A task
        binds its arguments when it is created: a bad one is answered at once, and its run
        calls the tool with what was bound then."""
        try:
            return BoundArguments(self, arguments, self.bind(arguments))
        except ArgumentError as exc:
            return exc.problems

    def _schema_errors(self, arguments: Mapping[str, Any]) -> list[str]:
        return [
            f"{'/'.join(map(str, e.instance_path)) or '(root)'}: {e.message}"
            for e in self.validator.iter_errors(arguments)
        ]

    async def call(self, ctx: Context, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run the tool; a tool's own failure becomes ``isError: true`` (never a traceback).

        ``arguments`` bound already (``bound``) are not bound again."""
        return await call_tool(ctx, self, arguments)

    def result_of(self, value: Any) -> dict[str, Any]:
        if isinstance(value, ToolResult):
            return value.to_wire()
        if self.output_schema is None:
            return call_result(content_of(value))
        jsonable = to_jsonable(value)
        structured = {"result": jsonable} if self.wrap_output else jsonable
        if not self.output_validator.is_valid(structured):
            # The tool's own failure, shown as one (isError) so the client can read it;
            # what exactly was wrong goes to the log, not to the client.
            first = next(iter(self.output_validator.iter_errors(structured)))
            where = "/".join(map(str, first.instance_path)) or "(root)"
            logger.error(
                "tool %s broke its outputSchema at %s: %s", self.name, where, first.message
            )
            return error_result(
                f"Tool {self.name} returned output that does not match its outputSchema"
            )
        if self.wrap_output:  # the content a plain return gives, as the SDK keeps it
            result = call_result(content_of(value, jsonable))
            result["structuredContent"] = structured
            return result
        return structured_result(structured)


@final
class BoundArguments(dict[str, Any]):
    """A tool call's arguments, as received (this dict), with the keyword arguments
    ``Tool.bind`` made of them (``Tool.bound``): checked against the inputSchema and
    converted once.

    ``Tool.call`` of the same tool takes the keyword arguments instead of binding again, the
    first time only: the handler's call adds to them, so a second call (a hook that calls on
    twice) binds afresh, and a task that has started no longer holds them twice.
    """

    __slots__ = ("_kwargs", "tool")

    def __init__(self, tool: Tool, arguments: Mapping[str, Any], kwargs: dict[str, Any]) -> None:
        super().__init__(arguments)
        self.tool = tool
        self._kwargs: dict[str, Any] | None = kwargs

    def take(self, tool: Tool) -> dict[str, Any]:
        """The keyword arguments to call ``tool`` with: the ones bound, once, when ``tool``
        is the one they were bound for; else ``tool.bind`` of these arguments."""
        kwargs = self._kwargs
        if kwargs is None or tool is not self.tool:
            return tool.bind(self)
        self._kwargs = None
        return kwargs


async def call_tool(ctx: Context, tool: Tool, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Run ``tool`` (``Tool.call``): a tool's own failure becomes ``isError: true`` (never a
    traceback). It is also the innermost link of the ``tools/call`` chain: an async handler
    is awaited from this frame, so that a tool that waits (a parked task) holds no frame of
    the chain's end, the tool call and the handler's call, but this one."""
    try:
        # arguments bound once already (``Tool.bound``) are not bound again
        if isinstance(arguments, BoundArguments):
            kwargs = arguments.take(tool)
        else:
            kwargs = tool.bind(arguments)
    except ArgumentError as exc:
        await trio.lowlevel.checkpoint()
        return error_result("Invalid arguments: " + "; ".join(exc.problems))
    del arguments  # bound: this frame keeps no copy while the tool runs (a parked task)
    try:
        if tool.signature.is_async:
            handler = tool.signature.fn(**tool.signature.with_context(ctx, kwargs))
            del kwargs  # the handler holds its arguments: this frame keeps none while it runs
            value = await handler
        else:
            value = await tool.signature.call(ctx, kwargs, thread=tool.thread)
    except ToolError as exc:
        await trio.lowlevel.checkpoint()
        return error_result(str(exc) or f"Tool {tool.name} failed")
    return tool.result_of(value)


@dataclass(slots=True)
class Resource:
    uri: str
    name: str
    signature: Signature
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    ttl_ms: int = 0
    cache_scope: str = "private"
    thread: bool = True

    def describe(self) -> dict[str, Any]:
        return _describe({"uri": self.uri, "name": self.name}, self)

    async def read(self, ctx: Context, uri: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Read it; ``kwargs`` are a template's variables, converted (see ``Registry``)."""
        value = await self.signature.call(ctx, kwargs, thread=self.thread)
        return {
            "contents": contents_of(value, uri, self.mime_type),
            "ttlMs": self.ttl_ms,
            "cacheScope": self.cache_scope,
        }


def _describe(wire: dict[str, Any], entry: Resource | ResourceTemplate) -> dict[str, Any]:
    for key, value in (
        ("title", entry.title),
        ("description", entry.description),
        ("mimeType", entry.mime_type),
        ("size", getattr(entry, "size", None)),
        ("annotations", entry.annotations),
        ("_meta", entry.meta),
    ):
        if value is not None:
            wire[key] = value
    return wire


_TEMPLATE_VAR = re.compile(r"\{([+#]?)([A-Za-z0-9_]+)\}")


@dataclass(slots=True)
class ResourceTemplate(Resource):
    """A parameterised resource, ``test://items/{id}``, matched by RFC 6570 level 1-2 rules."""

    pattern: re.Pattern[str] = field(default=re.compile(""))
    start: str = ""  # the literal text before the first variable: every URI it holds starts so

    def __post_init__(self) -> None:
        first = _TEMPLATE_VAR.search(self.uri)
        self.start = self.uri if first is None else self.uri[: first.start()]
        parts: list[str] = []
        last = 0
        for match in _TEMPLATE_VAR.finditer(self.uri):
            parts.append(re.escape(self.uri[last : match.start()]))
            operator, name = match.group(1), match.group(2)
            if operator == "#":  # fragment expansion: "#" then a reserved value (RFC 6570)
                parts.append(f"\\#(?P<{name}>.+)")
            elif operator == "+":  # reserved expansion: "/" and the like included
                parts.append(f"(?P<{name}>.+)")
            else:
                parts.append(f"(?P<{name}>[^/?#]+)")
            last = match.end()
        parts.append(re.escape(self.uri[last:]))
        self.pattern = re.compile("".join(parts))

    def describe(self) -> dict[str, Any]:
        return _describe({"uriTemplate": self.uri, "name": self.name}, self)

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.pattern.fullmatch(uri)
        return None if found is None else found.groupdict()

    def holds(self, uri: str) -> dict[str, Any] | None:
        """``uri``'s variables converted to their hints; None if this template does not
        hold it: no match, or variables that do not convert (``abc`` for ``note_id: int``)."""
        variables = self.match(uri)
        if variables is None:
            return None
        try:
            return self.signature.binder.from_strings(variables)
        except ArgumentError:
            return None


@final
@dataclass(slots=True)
class Prompt:
    name: str
    description: str
    signature: Signature
    arguments: list[dict[str, Any]]
    title: str | None = None
    meta: dict[str, Any] | None = None
    thread: bool = True

    def describe(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            wire["title"] = self.title
        wire["description"] = self.description
        if self.arguments:
            wire["arguments"] = self.arguments
        if self.meta is not None:
            wire["_meta"] = self.meta
        return wire

    async def get(self, ctx: Context, arguments: Mapping[str, Any]) -> dict[str, Any]:
        missing = [
            a["name"] for a in self.arguments if a.get("required") and a["name"] not in arguments
        ]
        if missing:
            raise InvalidParams(f"Missing required prompt argument(s): {', '.join(missing)}")
        try:
            kwargs = self.signature.binder.from_strings(arguments)
        except ArgumentError as exc:
            raise InvalidParams("Invalid prompt arguments: " + "; ".join(exc.problems)) from None
        value = await self.signature.call(ctx, kwargs, thread=self.thread)
        return {"messages": messages_of(value)}


@final
@dataclass(frozen=True, slots=True)
class Completer:
    """The completer of one prompt's or resource template's arguments.

    Its function takes ``(argument_name, value, context_arguments)`` and returns an iterable
    of suggestions (sync functions run in a worker thread unless ``thread`` is false).
    """

    fn: Handler
    thread: bool = True

    async def complete(
        self, ctx: Context, name: str, value: str, context: Mapping[str, str]
    ) -> dict[str, Any]:
        if inspect.iscoroutinefunction(self.fn):
            found = await self.fn(name, value, context)
        else:
            limiter = thread_limiter(ctx, self.thread)
            arguments = (name, value, context)
            found = await call_sync(self.fn, arguments, {}, thread=self.thread, limiter=limiter)
        values = [str(v) for v in found]
        return {
            "values": values[:MAX_COMPLETIONS],
            "total": len(values),
            "hasMore": len(values) > MAX_COMPLETIONS,
        }


@final
class _TemplateIndex:
    """Templates by their literal start: a URI can only be held by a template whose start it
    has, so a lookup tries those alone, in declaration order, however many are declared."""

    def __init__(self, templates: list[ResourceTemplate]) -> None:
        self._templates = templates
        self._by_start: dict[str, list[int]] = {}  # positions in declaration order
        for position, template in enumerate(templates):
            self._by_start.setdefault(template.start, []).append(position)
        self._lengths = sorted({len(start) for start in self._by_start})

    def candidates(self, uri: str) -> Iterator[ResourceTemplate]:
        positions: list[int] = []
        for length in self._lengths:
            if length > len(uri):
                break
            positions += self._by_start.get(uri[:length], ())
        for position in sorted(positions):
            yield self._templates[position]


@final
class Registry:
    """Everything a server serves, by name or URI. Filled by ``Server``'s decorators.

    Each ``add_*`` refuses a duplicate: a second declaration under the same name is a bug,
    never a silent replacement.
    """

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        self.templates: dict[str, ResourceTemplate] = {}
        self.prompts: dict[str, Prompt] = {}
        self.completers: dict[tuple[str, str], Completer] = {}
        self._listings: dict[str, list[dict[str, Any]]] = {}
        self._template_index: _TemplateIndex | None = None
        #: Why nothing more may be declared here (this server is mounted), or None.
        self.closed: str | None = None

    def listing(self, kind: str) -> list[dict[str, Any]]:
        """What ``{kind}/list`` shows (``tools``, ``resources``, ``templates`` or ``prompts``)
        as wire dicts in their order: tools by name, the others as declared. Built once and
        shared by every list request (each cuts its page from it) until the next ``add_*``."""
        entries = self._listings.get(kind)
        if entries is None:
            if kind == "tools":
                entries = [self.tools[name].wire for name in sorted(self.tools)]
            else:
                table: dict[str, Any] = getattr(self, kind)
                entries = [entry.describe() for entry in table.values()]
            self._listings[kind] = entries
        return entries

    def _renew(self) -> None:
        """Drop what is derived from the declarations (the listings, the templates' index):
        each is built again, from them all, when next asked for."""
        self._listings.clear()
        self._template_index = None

    def _check_open(self) -> None:
        if self.closed is not None:
            raise RuntimeError(self.closed)

    def add_tool(self, tool: Tool) -> None:
        self._check_open()
        if tool.name in self.tools:
            raise ValueError(f"tool {tool.name!r} is declared twice")
        self.tools[tool.name] = tool
        self._renew()

    def add_resource(self, entry: Resource) -> None:
        self._check_open()
        table: dict[str, Any] = (
            self.templates if isinstance(entry, ResourceTemplate) else self.resources
        )
        if entry.uri in table:
            raise ValueError(f"resource {entry.uri!r} is declared twice")
        table[entry.uri] = entry
        self._renew()

    def add_prompt(self, prompt: Prompt) -> None:
        self._check_open()
        if prompt.name in self.prompts:
            raise ValueError(f"prompt {prompt.name!r} is declared twice")
        self.prompts[prompt.name] = prompt
        self._renew()

    def add_completer(self, ref: tuple[str, str], completer: Completer) -> None:
        self._check_open()
        if ref in self.completers:
            raise ValueError(f"a completer for {ref[1]!r} is declared twice")
        self.completers[ref] = completer

    def merge(self, other: Registry, what: str) -> None:
        """Add everything ``other`` holds, or nothing: a name or URI both hold is refused
        (``ValueError`` naming each, and ``what`` was being added) before any is added."""
        tables: tuple[tuple[str, Mapping[Any, Any], Mapping[Any, Any]], ...] = (
            ("tool", self.tools, other.tools),
            ("resource", self.resources, other.resources),
            ("resource template", self.templates, other.templates),
            ("prompt", self.prompts, other.prompts),
            ("completer of", self.completers, other.completers),
        )
        clashes = [
            f"{kind} {key[1] if isinstance(key, tuple) else key!r}"
            for kind, mine, theirs in tables
            for key in theirs
            if key in mine
        ]
        if clashes:
            raise ValueError(f"{what} would declare twice: {', '.join(map(str, clashes))}")
        self._check_open()
        self.tools.update(other.tools)
        self.resources.update(other.resources)
        self.templates.update(other.templates)
        self.prompts.update(other.prompts)
        self.completers.update(other.completers)
        self._renew()

    def find_resource(self, uri: str) -> tuple[Resource, dict[str, Any]] | None:
        """The resource at ``uri`` (exact URIs first), with its template variables converted
        to their hints. A template whose variables do not convert (``abc`` for
        ``note_id: int``) does not hold ``uri``: the next one may, else it is not found."""
        resource = self.resources.get(uri)
        if resource is not None:
            return resource, {}
        if self._template_index is None:
            self._template_index = _TemplateIndex(list(self.templates.values()))
        for template in self._template_index.candidates(uri):
            variables = template.holds(uri)
            if variables is not None:
                return template, variables
        return None

    @property
    def serves_resources(self) -> bool:
        return bool(self.resources or self.templates)
