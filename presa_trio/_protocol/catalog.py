"""What one protocol revision defines, read from its schema: each method, who may send it, the
``$def`` its request, result or notification must satisfy; and the same for an extension's
schema (the Tasks extension, SEP-2663).

Pure: a ``Schemas`` in, lookup tables out. It decides nothing about a message; the capture
checker asks it. spec 2026-07-28 basic/index.mdx, 2025-11-25 and 2025-06-18 schema.ts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, final

from .dialect import META_CLIENT_CAPABILITIES
from .schema import (
    SCHEMA_VERSION,
    Schemas,
    Violation,
    error_definition,
    load_document,
    load_extension,
)

CLIENT, SERVER = "client", "server"

#: The revisions whose schema is vendored, newest first.
VERSIONS: tuple[str, ...] = ("2026-07-28", "2025-11-25", "2025-06-18")

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


def schema_version(requested: object) -> str | None:
    """The vendored schema a negotiated version is checked with: its own when vendored, a
    revision between two vendored ones with the older of the two (a version string is a date);
    None for anything that is not a version string."""
    if not isinstance(requested, str) or len(requested) != 10 or requested[4] != "-":
        return None
    for version in VERSIONS:
        if requested >= version:
            return version
    return VERSIONS[-1]


def _method_of(definition: Mapping[str, Any]) -> str | None:
    """The ``method`` const of a request or notification ``$def`` (also inside ``allOf``)."""
    method = definition.get("properties", {}).get("method", {}).get("const")
    if isinstance(method, str):
        return method
    for part in definition.get("allOf", ()):
        found = _method_of(part)
        if found is not None:
            return found
    return None


def _members(definitions: Mapping[str, Any], union: str) -> list[str]:
    """The ``$def`` names a union (``ClientRequest``...) lists; a union of one is its own."""
    node = definitions.get(union)
    if node is None:
        return []
    refs = node.get("anyOf", node.get("oneOf"))
    if refs is None:
        return [union] if _method_of(node) else []
    return [ref["$ref"].rsplit("/", 1)[1] for ref in refs]


@dataclass(frozen=True, slots=True)
class Method:
    """One method: the ``$def`` of its message, of its result (requests), and its senders."""

    definition: str
    result: str | None
    senders: frozenset[str]


def _result_of(definitions: Mapping[str, Any], request: str) -> str:
    typed = request.removesuffix("Request") + "Result"
    if typed in definitions:
        return typed
    return "EmptyResult" if "EmptyResult" in definitions else "Result"


@final
@dataclass
class Catalog:
    """One revision's methods, envelopes and errors, from its schema."""

    version: str
    schemas: Schemas
    requests: dict[str, Method] = field(default_factory=dict)
    notifications: dict[str, Method] = field(default_factory=dict)

    @classmethod
    def of(cls, version: str, schemas: Schemas | None = None) -> Catalog:
        schemas = schemas if schemas is not None else Schemas(load_document(version))
        catalog = cls(version, schemas)
        definitions = schemas.definitions
        for sender, prefix in ((CLIENT, "Client"), (SERVER, "Server")):
            for name in _members(definitions, f"{prefix}Request"):
                catalog._add(catalog.requests, name, sender, _result_of(definitions, name))
            for name in _members(definitions, f"{prefix}Notification"):
                catalog._add(catalog.notifications, name, sender, None)
        return catalog

    def _add(self, table: dict[str, Method], name: str, sender: str, result: str | None) -> None:
        method = _method_of(self.schemas.definitions[name])
        if method is None:
            return
        known = table.get(method)
        senders = frozenset({sender} | (known.senders if known else set()))
        table[method] = Method(name, result, senders)

    @property
    def modern(self) -> bool:
        """The stateless 2026-07-28 dialect: per-request ``_meta``, ``resultType``, no
        requests from the server."""
        return self.version >= SCHEMA_VERSION

    @property
    def result_envelope(self) -> str:
        return (
            "JSONRPCResultResponse"
            if self.schemas.has("JSONRPCResultResponse")
            else ("JSONRPCResponse")
        )

    def error_envelope(self, code: object) -> str:
        typed = error_definition(code)
        if self.schemas.has(typed):
            return typed
        return (
            "JSONRPCErrorResponse" if self.schemas.has("JSONRPCErrorResponse") else ("JSONRPCError")
        )


def declares_tasks(params: object) -> bool:
    """Whether a request's ``params`` declare the Tasks extension in their per-request client
    capabilities (SEP-2663: the one opt-in; nothing else asks for a task)."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    capabilities = meta.get(META_CLIENT_CAPABILITIES) if isinstance(meta, Mapping) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions


@final
@dataclass
class ExtensionCatalog:
    """An extension's methods and result types, from its schema (SEP-2133: an extension adds
    methods and ``resultType`` values; its requests also carry the core request ``_meta``).

    The one source of the Tasks extension's rules for every checker: the capture checker
    (``presa-trio validate``), ``presa_trio.testing.Client`` and the remote test client.
    """

    identifier: str
    schemas: Schemas
    requests: dict[str, Method] = field(default_factory=dict)
    notifications: dict[str, Method] = field(default_factory=dict)
    #: resultType value -> the ``$def`` of a result of that type (``task`` -> CreateTaskResult)
    result_types: dict[str, str] = field(default_factory=dict)
    #: The requests such a result may answer (SEP-2663, Supported Methods: ``tools/call``).
    eligible: frozenset[str] = frozenset()

    @classmethod
    def tasks(cls, schemas: Schemas) -> ExtensionCatalog:
        catalog = cls(
            TASKS_EXTENSION,
            schemas,
            result_types={"task": "CreateTaskResult"},
            eligible=frozenset({"tools/call"}),
        )
        for name, definition in schemas.definitions.items():
            method = _method_of(definition)
            if method is None:
                continue
            if name.endswith("Request") and method.startswith("tasks/"):
                result = name.removesuffix("Request") + "Result"
                catalog.requests[method] = Method(name, result, frozenset({CLIENT}))
            elif name.endswith("Notification") and method.startswith("notifications/tasks"):
                catalog.notifications[method] = Method(name, None, frozenset({SERVER}))
        return catalog

    @classmethod
    def load_tasks(cls) -> ExtensionCatalog:
        """The Tasks extension's catalog, from the packaged schema."""
        return cls.tasks(load_extension())

    def request_violations(
        self, message: Mapping[str, Any], core: Schemas
    ) -> list[Violation] | None:
        """How an extension request fails its ``$def`` and, as every 2026-07-28 request, the
        core ``RequestParams`` (at ``/params``); None when the method is not the extension's."""
        method = self.requests.get(message.get("method"))  # type: ignore[arg-type]
        if method is None:
            return None
        found = self.schemas.violations(method.definition, message)
        if core.has("RequestParams"):
            params = message.get("params")
            found += [
                Violation(v.definition, "/params" + v.pointer, v.message)
                for v in core.violations(
                    "RequestParams", params if isinstance(params, dict) else {}
                )
            ]
        return found

    def notification_violations(self, message: Mapping[str, Any]) -> list[Violation] | None:
        """How an extension notification fails its ``$def``; None when not the extension's."""
        method = self.notifications.get(message.get("method"))  # type: ignore[arg-type]
        return None if method is None else self.schemas.violations(method.definition, message)

    def result_definition(
        self, method: str | None, result: Mapping[str, Any], declared: bool
    ) -> str | None:
        """The extension ``$def`` a result must satisfy: an extension method's own result
        (whatever its ``resultType`` says), else the one a ``resultType`` of the extension
        names (``task``: ``CreateTaskResult``) when the request declared the extension; None
        when the extension does not type it."""
        extension = self.requests.get(method) if method is not None else None
        if extension is not None:
            return extension.result
        kind = result.get("resultType")
        if declared and isinstance(kind, str):
            return self.result_types.get(kind)
        return None

    def ineligible(self, method: str | None, result: Mapping[str, Any]) -> str | None:
        """Why a result of one of the extension's ``resultType`` values cannot answer
        ``method`` (a client MUST treat it as invalid); None when it can, or is not one."""
        kind = result.get("resultType")
        if not isinstance(kind, str) or kind not in self.result_types or method is None:
            return None
        if method in self.eligible:
            return None
        return f"resultType {kind!r} answers only {', '.join(sorted(self.eligible))}, not {method}"

    def result_violations(
        self, method: str | None, result: Mapping[str, Any], declared: bool
    ) -> list[Violation] | None:
        """How a result fails the extension ``$def`` that types it (``result_definition``),
        an ineligible method first; None when the extension does not type it."""
        definition = self.result_definition(method, result, declared)
        if definition is None:
            return None
        found = []
        if method not in self.requests:
            why = self.ineligible(method, result)
            if why is not None:
                found.append(Violation(definition, "/resultType", why))
        return found + self.schemas.violations(definition, result)
