"""presa_trio: a Trio-native, structured-concurrency MCP 2026-07-28 server library.

Declare tools, resources, prompts and completions on a ``Server``; serve it over Streamable
HTTP with ``server.asgi_app()`` under ``hypercorn --worker-class trio``, or over stdio with
``serve_stdio(server)``. Bearer-token authorization over HTTP: ``presa_trio.auth``. Writing a
protocol extension: ``presa_trio.extensions``.
"""

from ._context import Context as Context
from ._request_state import KeyRing as KeyRing
from ._requestlog import RequestFilter as RequestFilter
from ._results import ToolResult as ToolResult
from ._runtime import Runtime as Runtime
from ._schema import Schemas as Schemas
from ._schema import Violation as Violation
from ._server import Server as Server
from ._transports.asgi import AsgiApp as AsgiApp
from ._transports.stdio import serve_stdio as serve_stdio
from ._typeschema import Param as Param
from ._wire.admission import HostPolicy as HostPolicy
from ._wire.dialect import PROTOCOL_VERSION as PROTOCOL_VERSION
from .errors import HeaderMismatch as HeaderMismatch
from .errors import InternalError as InternalError
from .errors import InvalidParams as InvalidParams
from .errors import McpError as McpError
from .errors import MethodNotFound as MethodNotFound
from .errors import MissingCapability as MissingCapability
from .errors import ToolError as ToolError

__all__ = [
    "PROTOCOL_VERSION",
    "AsgiApp",
    "Context",
    "HeaderMismatch",
    "HostPolicy",
    "InternalError",
    "InvalidParams",
    "KeyRing",
    "McpError",
    "MethodNotFound",
    "MissingCapability",
    "Param",
    "RequestFilter",
    "Runtime",
    "Schemas",
    "Server",
    "ToolError",
    "ToolResult",
    "Violation",
    "serve_stdio",
]
