"""Writing a protocol extension: everything an extension may use of presa_trio, and no more.

Subclass ``Extension``; serve methods with ``Route``; keep per-run state in the service your
``serve`` starts (it receives an ``ExtensionContext``), and name its type,
``Extension[MyService]``, so that ``ctx.service(extension)`` is typed; wrap work you run for
users in the same error boundaries the core uses, and trace it with
``ExtensionContext.tracing`` (None when the server does not trace); measure or store what will
go on the wire with ``to_json``, the writer the wire uses. ``presa_trio.ext.tasks`` is written
on this alone.
"""

from ._boundary import error_boundary as error_boundary
from ._boundary import protocol_error as protocol_error
from ._handlers.results import error_result as error_result
from ._kernel.extension_hooks import CallNext as CallNext
from ._kernel.extension_hooks import Extension as Extension
from ._kernel.extension_hooks import ExtensionContext as ExtensionContext
from ._kernel.registry import Tool as Tool
from ._kernel.routes import Route as Route
from ._kernel.tracing import SpanHandle as SpanHandle
from ._kernel.tracing import Tracing as Tracing
from ._protocol.jsonrpc import to_json as to_json

__all__ = [
    "CallNext",
    "Extension",
    "ExtensionContext",
    "Route",
    "SpanHandle",
    "Tool",
    "Tracing",
    "error_boundary",
    "error_result",
    "protocol_error",
    "to_json",
]
