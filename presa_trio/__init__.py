"""presa_trio: a Trio-native, structured-concurrency MCP 2026-07-28 server library.

Declare tools, resources, prompts and completions on a ``Server``; serve it over Streamable
HTTP with ``server.asgi_app()`` under ``hypercorn --worker-class trio``.
"""

from ._context import Context as Context
from ._dispatch import Method as Method
from ._extensions import Extension as Extension
from ._registry import ToolResult as ToolResult
from ._request_state import KeyRing as KeyRing
from ._schema import Schemas as Schemas
from ._schema import Violation as Violation
from ._server import Server as Server
from ._transports.asgi import AsgiApp as AsgiApp
from ._typeschema import Param as Param
from ._wire.admission import HostPolicy as HostPolicy
from ._wire.dialect import PROTOCOL_VERSION as PROTOCOL_VERSION
from .errors import (
    HeaderMismatch as HeaderMismatch,
)
from .errors import (
    InternalError as InternalError,
)
from .errors import (
    InvalidParams as InvalidParams,
)
from .errors import (
    McpError as McpError,
)
from .errors import (
    MethodNotFound as MethodNotFound,
)
from .errors import (
    MissingCapability as MissingCapability,
)
from .errors import (
    ToolError as ToolError,
)

__all__ = [
    "PROTOCOL_VERSION",
    "AsgiApp",
    "Context",
    "Extension",
    "HeaderMismatch",
    "HostPolicy",
    "InternalError",
    "InvalidParams",
    "KeyRing",
    "McpError",
    "Method",
    "MethodNotFound",
    "MissingCapability",
    "Param",
    "Schemas",
    "Server",
    "ToolError",
    "ToolResult",
    "Violation",
]
