"""Which schema ``$def`` each message of a client's conversation must satisfy, in either era.

Pure (values in, violations out): it names the ``$def`` of a message sent or received by a
client that negotiated ``version`` (2026-07-28, or an ``initialize`` era's 2025-11-25 or
2025-06-18) and checks the message against the vendored schema of that version. A result is
checked against the typed result of its request's method; in 2026-07-28 a ``resultType`` the
core schema does not define is a violation, unless it is ``task`` and the request declared
the Tasks extension (SEP-2663). Tasks-extension requests, results and notifications are typed
by the same ``ExtensionCatalog`` the capture checker and the in-process client use. It raises
nothing and sends nothing: the client (``_client/remote.py``) does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

from .._protocol.catalog import ExtensionCatalog, declares_tasks
from .._protocol.dialect import PROTOCOL_VERSION
from .._protocol.era import LEGACY_VERSIONS, result_definition
from .._protocol.schema import Schemas, Violation, error_definition, load_document

#: The versions whose schema is vendored, newest first.
CHECKED_VERSIONS: tuple[str, ...] = (PROTOCOL_VERSION, *LEGACY_VERSIONS)
#: What a 2026-07-28 result's ``resultType`` may say in the core schema.
CORE_RESULT_TYPES = ("complete", "input_required")


@final
class MessageChecks:
    """The schema of one negotiated version, applied message by message."""

    def __init__(self, version: str) -> None:
        if version not in CHECKED_VERSIONS:
            raise ValueError(f"no vendored schema for protocol version {version!r}")
        self.version = version
        self.modern = version == PROTOCOL_VERSION
        self.schemas = Schemas(load_document(version))
        self._requests = self.schemas.request_definitions()
        self._notifications = self.schemas.notification_definitions()
        self._client_notifications = _methods_of(self.schemas, "ClientNotification")
        self._server_requests = {} if self.modern else _methods_of(self.schemas, "ServerRequest")
        defined = self.schemas.definitions
        self._error = (
            "JSONRPCErrorResponse" if "JSONRPCErrorResponse" in defined else "JSONRPCError"
        )
        self._response = (
            "JSONRPCResultResponse" if "JSONRPCResultResponse" in defined else "JSONRPCResponse"
        )
        #: The Tasks extension (2026-07-28 only), loaded at its first message.
        self._tasks_catalog: ExtensionCatalog | None = None

    def _tasks(self) -> ExtensionCatalog:
        if self._tasks_catalog is None:
            self._tasks_catalog = ExtensionCatalog.load_tasks()
        return self._tasks_catalog

    # ------------------------------------------------------------------ the client's

    def request(self, message: Mapping[str, Any]) -> list[Violation]:
        """A request this client sends."""
        definition = self._requests.get(str(message.get("method")))
        if definition is None and self.modern:
            extension = self._tasks().request_violations(message, self.schemas)
            if extension is not None:
                return extension
        return self.schemas.violations(definition or "JSONRPCRequest", message)

    def notification(self, message: Mapping[str, Any]) -> list[Violation]:
        """A notification this client sends."""
        method = str(message.get("method"))
        definition = self._client_notifications.get(method, "JSONRPCNotification")
        return self.schemas.violations(definition, message)

    def answer(self, method: str, message: Mapping[str, Any]) -> list[Violation]:
        """This client's answer to a request ``method`` the server sent (older era)."""
        if "error" in message:
            return self.schemas.violations(self._error, message)
        found = self.schemas.violations(self._response, message)
        definition = self._server_requests.get(method, "").removesuffix("Request") + "Result"
        if definition in self.schemas.definitions and not found:
            found = self.schemas.violations(definition, message["result"])
        return found

    # ------------------------------------------------------------------ the server's

    def server_notification(self, message: Mapping[str, Any]) -> list[Violation]:
        method = str(message.get("method"))
        definition = self._notifications.get(method)
        if definition is None and self.modern:
            extension = self._tasks().notification_violations(message)
            if extension is not None:
                return extension
        return self.schemas.violations(definition or "JSONRPCNotification", message)

    def server_request(self, message: Mapping[str, Any]) -> list[Violation]:
        """A request the server sent: the older era's elicitation, sampling, roots, ping; a
        2026-07-28 server sends none (wire §10: it asks through ``input_required``)."""
        if self.modern:
            method = message.get("method")
            return [
                Violation(
                    "JSONRPCMessage", "", f"a {PROTOCOL_VERSION} server sent a request ({method})"
                )
            ]
        definition = self._server_requests.get(str(message.get("method")), "JSONRPCRequest")
        return self.schemas.violations(definition, message)

    def response(self, message: Mapping[str, Any], request: Mapping[str, Any]) -> list[Violation]:
        """The server's response to ``request`` (as sent). A result is checked against the
        typed result of the request's method; the pointers of its violations start at the
        result, as the ``$def`` they name does."""
        if "error" in message:
            error = message.get("error")
            code = error.get("code") if isinstance(error, Mapping) else None
            definition = error_definition(code) if self.modern else self._error
            return self.schemas.violations(definition, message)
        found = self.schemas.violations(self._response, message)
        result = message.get("result")
        if found or not isinstance(result, Mapping):
            return found
        method = str(request.get("method"))
        params = request.get("params") or {}
        typed = self._requests.get(method, "").removesuffix("Request") + "Result"
        if not self.modern:
            definition = result_definition(typed, params, result)
            if definition in self.schemas.definitions:
                return self.schemas.violations(definition, result)
            return []
        kind = result.get("resultType")
        extension = self._tasks().result_violations(method, result, declares_tasks(params))
        if extension is not None:
            return extension
        if kind == "input_required":
            return self.schemas.violations("InputRequiredResult", result)
        if kind not in CORE_RESULT_TYPES:
            allowed = ", ".join(CORE_RESULT_TYPES)
            why = f"{kind!r} is not a result type of {PROTOCOL_VERSION} ({allowed})"
            if kind == "task":
                why += "; 'task' needs the Tasks extension, which the request did not declare"
            return [Violation("Result", "/resultType", why)]
        if typed in self.schemas.definitions:
            return self.schemas.violations(typed, result)
        return self.schemas.violations("Result", result)


def _methods_of(schemas: Schemas, union: str) -> dict[str, str]:
    """Each method of the union ``$def`` (``ClientNotification``, ``ServerRequest``) mapped
    to its own ``$def``; empty when the schema has no such union."""
    found: dict[str, str] = {}
    union_def = schemas.definitions.get(union, {})
    for ref in union_def.get("anyOf", union_def.get("oneOf", [])):
        name = str(ref.get("$ref", "")).rsplit("/", 1)[-1]
        method = schemas.definitions.get(name, {}).get("properties", {}).get("method", {})
        if isinstance(method.get("const"), str):
            found[method["const"]] = name
    return found
