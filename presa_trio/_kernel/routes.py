"""``Route``: one request method the dispatcher serves, and what it checks around the handler.

A route is data: the schema ``$defs`` of its request and result, the params key that
``Mcp-Name`` mirrors, whether it may answer ``input_required``, and the client capability it
needs. The method table is the only place that knows these; nothing here runs a handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, final

from .context import Context

MethodHandler = Callable[[Context, dict[str, Any]], Awaitable[dict[str, Any]]]


def _always() -> bool:
    return True


@final
@dataclass(frozen=True, slots=True)
class Route:
    """A routable request method.

    ``request_def``/``result_def`` name schema ``$defs``; ``name_param`` is the params key
    that ``Mcp-Name`` mirrors; ``input_required`` says whether MRTR results are allowed (wire
    §10). ``available`` gates the method on what the server advertises (-32601 when False);
    ``requires`` is a ``ClientCapabilities`` fragment the request must declare (-32021).
    ``name_header_required=False`` admits a request without ``Mcp-Name`` (a present one
    must still match).
    The handler returns the result without ``resultType: "complete"`` or ``serverInfo``:
    the dispatcher adds both on the way out.
    """

    name: str
    handler: MethodHandler
    request_def: str | None = None
    result_def: str | None = None
    name_param: str | None = None
    input_required: bool = False
    available: Callable[[], bool] = _always
    requires: Mapping[str, Any] | None = None
    name_header_required: bool = True
