"""What the capture checker keeps between lines and how it picks a line's schema: the forced
version, a ``Catalog`` per revision (loaded on first use), the Tasks extension's catalog, the
traffic seen so far (``traffic.py``); the revision a message is checked with and, for a bare
message, its sender.

Pure: no I/O beyond the packaged schemas, no clock. spec 2026-07-28 basic/index.mdx (versions
per request), 2025-11-25 lifecycle (``initialize``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

from .capture_records import CLIENT, SERVER, Record
from .catalog import VERSIONS, Catalog, ExtensionCatalog, Method, schema_version
from .dialect import META_PROTOCOL_VERSION
from .findings import LineFindings
from .schema import SCHEMA_VERSION, Schemas
from .traffic import Traffic

LEGACY = VERSIONS[1]  # the newest revision with ``initialize``


def kind_of(message: Mapping[str, Any]) -> str | None:
    """``request``, ``notification``, ``response``, or None for none of them."""
    if isinstance(message.get("method"), str):
        return "request" if "id" in message else "notification"
    if "result" in message or "error" in message:
        return "response"
    return None


def params_of(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message's ``params`` when they are an object, else empty."""
    params = message.get("params")
    return params if isinstance(params, dict) else {}


def check_core_message(
    out: LineFindings,
    catalog: Catalog,
    core: Method,
    message: Mapping[str, Any],
    direction: str,
) -> None:
    """A core request or notification: sent by a side that may send it, and its ``$def``."""
    if direction not in core.senders:
        out.add(
            core.definition, "/method", f"{message['method']} is not sent by the {direction}",
            "direction",
        )  # fmt: skip
    out.schema(catalog.schemas, core.definition, message, "")


@final
class CaptureState:
    """The checker's memory: ``forced`` (a version for every line, or None), the catalogs,
    ``tasks`` (the Tasks extension's catalog) and ``traffic``."""

    def __init__(self, schemas: Schemas | None, forced: str | None) -> None:
        if forced is not None and forced not in VERSIONS:
            raise ValueError(f"no schema for version {forced!r}; one of {', '.join(VERSIONS)}")
        self.forced = forced
        self._catalogs: dict[str, Catalog] = {}
        if schemas is not None:
            self._catalogs[SCHEMA_VERSION] = Catalog.of(SCHEMA_VERSION, schemas)
        self.tasks = ExtensionCatalog.load_tasks()
        self.traffic = Traffic()

    def catalog(self, version: str) -> Catalog:
        found = self._catalogs.get(version)
        if found is None:
            found = self._catalogs[version] = Catalog.of(version)
        return found

    def version(self, record: Record, message: Mapping[str, Any]) -> str:
        """The revision a message is checked with: the forced one; else the one negotiated
        on its connection (``initialize``); its ``MCP-Protocol-Version`` header; its
        ``_meta``; an ``initialize``'s requested one; its scope's; else 2026-07-28."""
        if self.forced is not None:
            return self.forced
        negotiated = self.traffic.session_version(record)
        if negotiated is not None:
            return negotiated
        header = schema_version(record.header("mcp-protocol-version"))
        if header is not None:
            return header
        params = params_of(message)
        meta = params.get("_meta")
        if isinstance(meta, dict):
            found = schema_version(meta.get(META_PROTOCOL_VERSION))
            if found is not None:
                return found
        if message.get("method") == "initialize":
            found = schema_version(params.get("protocolVersion"))
            return min(found or LEGACY, LEGACY)
        return self.traffic.scope_version(record) or SCHEMA_VERSION

    def infer(self, message: Mapping[str, Any], kind: str | None) -> str:
        """The sender of a bare message: requests come from the client except those only a
        server sends (sampling, elicitation, roots in the older era); a response answers the
        side whose request with that id is in flight; notifications are the server's except
        those only a client sends."""
        legacy = self.catalog(LEGACY)
        method = message.get("method")
        if kind == "request":
            known = legacy.requests.get(method) if isinstance(method, str) else None
            return SERVER if known is not None and known.senders == {SERVER} else CLIENT
        if kind == "response":
            ours = self.traffic.in_flight_from(SERVER, message.get("id"))
            theirs = self.traffic.in_flight_from(CLIENT, message.get("id"))
            return CLIENT if ours and not theirs else SERVER
        if method == "notifications/cancelled":
            return CLIENT
        known = legacy.notifications.get(method) if isinstance(method, str) else None
        return CLIENT if known is not None and known.senders == {CLIENT} else SERVER
