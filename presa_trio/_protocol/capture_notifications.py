"""The capture checker's notifications: each against its method's ``$def`` (the core's, or the
Tasks extension's ``notifications/tasks`` once declared), a progress token against the
requests in flight, a cancellation remembered.

Pure: a line's notification and the checker's memory (``CaptureState``) in, findings out.
spec 2026-07-28 basic/utilities/progress.mdx and cancellation.mdx, SEP-2663.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .capture_http import server_http
from .capture_records import CLIENT, SERVER, Record
from .capture_state import CaptureState, check_core_message, params_of
from .catalog import Catalog
from .findings import LineFindings


def check_notification(
    state: CaptureState, out: LineFindings, record: Record, message: dict[str, Any], direction: str
) -> None:
    """Check one notification (``direction``: who sent it)."""
    method: str = message["method"]
    catalog = _notification_catalog(state, record, message, direction)
    if direction == CLIENT:
        state.traffic.note_exchange(record, "notification", catalog)
    core = catalog.notifications.get(method)
    extension = state.tasks.notifications.get(method)
    if core is not None:
        check_core_message(out, catalog, core, message, direction)
    elif (
        extension is not None
        and catalog.modern
        and (state.traffic.server_tasks or state.traffic.client_tasks)
    ):
        for violation in state.tasks.notification_violations(message) or ():
            out.add(violation.definition, violation.pointer, violation.message, "schema")
    else:
        out.add(
            "ServerNotification" if direction == SERVER else "ClientNotification",
            "/method",
            f"no notification {method!r} in {catalog.version} or a declared extension",
            "unknown-method",
        )
        out.schema(catalog.schemas, "JSONRPCNotification", message, "")
    if record.has_http and direction == SERVER:
        server_http(state, out, record, message, catalog)
    params = params_of(message)
    if method == "notifications/progress" and "progressToken" in params:
        if not state.traffic.token_live(params["progressToken"]):
            out.add(
                "ProgressNotification",
                "/params/progressToken",
                f"no request in flight sent progress token {params['progressToken']!r}",
                "progress-token",
            )
    elif method == "notifications/cancelled" and "requestId" in params:
        state.traffic.cancel(record, direction, params["requestId"])


def _notification_catalog(
    state: CaptureState, record: Record, message: Mapping[str, Any], direction: str
) -> Catalog:
    exchange = state.traffic.exchange(record)
    if state.forced is None and direction == SERVER and exchange is not None:
        return exchange.catalog
    return state.catalog(state.version(record, message))
