"""Validators for the vendored core schemas (2026-07-28, and 2025-11-25 and 2025-06-18 for the
older era's sessions) and the Tasks extension's, compiled per ``$def`` on first use; and for
schemas found in traffic (a tool's), with no remote ``$ref`` fetched.

The schema ships inside the package (``presa_trio/schema``). Validation runs on
``jsonschema-rs``, the one engine at run time (a compiled validator, 200 to 460 times faster
than the pure-Python ``jsonschema``, which the test suite keeps as the reference it cross-checks
against; see the README). Nothing here knows about methods: callers name the ``$def``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, final

import jsonschema_rs

from .leaves import leaves

SCHEMA_VERSION = "2026-07-28"

# Error responses the schema types by code; every other error is a plain JSONRPCErrorResponse.
ERROR_DEFINITIONS = {
    -32020: "HeaderMismatchError",
    -32021: "MissingRequiredClientCapabilityError",
    -32022: "UnsupportedProtocolVersionError",
}


def error_definition(code: object) -> str:
    """The ``$def`` an error response with ``code`` must satisfy."""
    return (
        ERROR_DEFINITIONS.get(code, "JSONRPCErrorResponse")
        if isinstance(code, int)
        else ("JSONRPCErrorResponse")
    )


_DIALECT = "https://json-schema.org/draft/2020-12/schema"


@final
@dataclass(frozen=True, slots=True)
class Violation:
    """One way an instance fails its ``$def``: where (a JSON pointer) and why."""

    definition: str
    pointer: str
    message: str

    def __str__(self) -> str:
        return f"{self.definition} at {self.pointer or '/'}: {self.message}"


#: The Tasks extension's (SEP-2663) schema, written for presa_trio from the SEP's TypeScript
#: definitions (schema/README.md).
TASKS_EXTENSION_SCHEMA = "extensions/tasks"

#: The URI an extension schema's ``$ref`` names the 2026-07-28 core schema by
#: (``urn:...#/$defs/Result``); resolved from the packaged file, never fetched.
CORE_SCHEMA_URI = f"urn:presa-trio:schema:{SCHEMA_VERSION}"


def load_extension_document(name: str = TASKS_EXTENSION_SCHEMA) -> dict[str, Any]:
    """A packaged extension schema (``extensions/tasks``), as the file holds it."""
    path = resources.files("presa_trio") / "schema" / name / "schema.json"
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def load_extension(name: str = TASKS_EXTENSION_SCHEMA) -> Schemas:
    """An extension schema's validators, its references into the core resolved against the
    packaged 2026-07-28 schema."""
    registry = jsonschema_rs.Registry([(CORE_SCHEMA_URI, load_document(SCHEMA_VERSION))])
    return Schemas(load_extension_document(name), registry=registry)


def load_document(version: str = SCHEMA_VERSION) -> dict[str, Any]:
    """The vendored schema of ``version``, with its published errata applied."""
    path = resources.files("presa_trio") / "schema" / version / "schema.json"
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if version in _NUMBER_ERRATUM:
        _number_erratum(document)
    return document


#: The released 2025-06-18 and 2025-11-25 schemas type a ``NumberSchema``'s ``minimum``,
#: ``maximum`` and ``default`` as integers, so an elicitation form field ``{"type":
#: "number", "default": 95.5}`` (SEP-1034) would not validate; the specification means
#: numbers, and the official conformance runner applies the same correction.
_NUMBER_ERRATUM = frozenset({"2025-06-18", "2025-11-25"})


def _number_erratum(document: dict[str, Any]) -> None:
    definitions = document.get("$defs") or document.get("definitions") or {}
    properties = definitions.get("NumberSchema", {}).get("properties", {})
    for key in ("minimum", "maximum", "default"):
        if key in properties:
            properties[key] = {**properties[key], "type": "number"}


def _pointer(path: Iterator[object] | list[object]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _no_retrieval(uri: str) -> Any:
    raise ValueError(f"{uri}: presa_trio resolves no remote schema (no I/O while validating)")


class _Compiled:
    """One ``$def`` compiled by ``jsonschema-rs``: a fast yes/no and, on no, the reasons."""

    __slots__ = ("errors", "is_valid")

    def __init__(
        self, schema: dict[str, Any], registry: jsonschema_rs.Registry | None = None
    ) -> None:
        validator = jsonschema_rs.validator_for(
            schema, validate_formats=True, retriever=_no_retrieval, registry=registry
        )
        self.is_valid: Callable[[Any], bool] = validator.is_valid
        self.errors: Callable[[Any], list[tuple[list[object], str]]] = lambda instance: _unique(
            leaf for error in validator.iter_errors(instance) for leaf in leaves(error, schema)
        )


def compile_schema(schema: Mapping[str, Any]) -> _Compiled:
    """A validator for a schema found in traffic (a tool's ``inputSchema`` or
    ``outputSchema``); raises ``ValueError`` when it cannot be compiled."""
    try:
        return _Compiled(dict(schema))
    except (ValueError, jsonschema_rs.ValidationError, TypeError) as exc:
        reason = str(exc).strip().splitlines()
        raise ValueError(reason[0] if reason else type(exc).__name__) from None


def _unique(
    leaves: Iterable[tuple[list[object], str]],
) -> list[tuple[list[object], str]]:
    seen: set[tuple[str, str]] = set()
    found = []
    for path, message in leaves:
        key = (_pointer(path), message)
        if key not in seen:
            seen.add(key)
            found.append((path, message))
    return found


def violations_of(compiled: _Compiled, instance: object, definition: str) -> list[Violation]:
    """``compiled``'s reasons to refuse ``instance``, named ``definition``; empty if valid."""
    if compiled.is_valid(instance):
        return []
    return [Violation(definition, _pointer(p), m) for p, m in compiled.errors(instance)]


@final
class Schemas:
    """The core schema of one protocol version (or an extension's), with a validator per
    ``$def``; ``registry`` resolves the documents its ``$ref`` name by URI."""

    def __init__(
        self,
        document: dict[str, Any] | None = None,
        *,
        registry: jsonschema_rs.Registry | None = None,
    ) -> None:
        self.document = document if document is not None else load_document()
        self._registry = registry
        # 2025-06-18 and older are draft-07 documents, their definitions under another key.
        self._key = "$defs" if "$defs" in self.document else "definitions"
        self._dialect = self.document.get("$schema", _DIALECT)
        self.definitions: dict[str, Any] = self.document[self._key]
        self._compiled: dict[str, _Compiled] = {}

    def _get(self, definition: str) -> _Compiled:
        compiled = self._compiled.get(definition)
        if compiled is None:
            if definition not in self.definitions:
                raise KeyError(f"no $def {definition!r} in the schema")
            root = {
                "$schema": self._dialect,
                "$ref": f"#/{self._key}/{definition}",
                self._key: self.definitions,
            }
            compiled = self._compiled[definition] = _Compiled(root, self._registry)
        return compiled

    def is_valid(self, definition: str, instance: object) -> bool:
        return self._get(definition).is_valid(instance)

    def violations(self, definition: str, instance: object) -> list[Violation]:
        return violations_of(self._get(definition), instance, definition)

    def has(self, definition: str) -> bool:
        return definition in self.definitions

    def request_definitions(self) -> dict[str, str]:
        """Map each core client request method to its request ``$def``."""
        return self._methods_of("ClientRequest")

    def result_definitions(self) -> dict[str, str]:
        """Map each core request method to its result ``$def`` (``XRequest`` -> ``XResult``)."""
        return {
            method: definition.removesuffix("Request") + "Result"
            for method, definition in self.request_definitions().items()
            if definition.removesuffix("Request") + "Result" in self.definitions
        }

    def notification_definitions(self) -> dict[str, str]:
        """Map each core server notification method to its ``$def``."""
        return self._methods_of("ServerNotification")

    def _methods_of(self, union: str) -> dict[str, str]:
        found: dict[str, str] = {}
        union_def = self.definitions[union]
        for ref in union_def.get("anyOf", union_def.get("oneOf", [{"$ref": f"#/{union}"}])):
            name = ref["$ref"].rsplit("/", 1)[1]
            method = self.definitions[name]["properties"]["method"]["const"]
            found[method] = name
        return found
