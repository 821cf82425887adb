"""presa_trio: a Trio-native, structured-concurrency MCP 2026-07-28 server library.

Declare tools, resources, prompts and completions on a ``Server``; serve it over Streamable
HTTP with ``server.asgi_app()`` under ``hypercorn --worker-class trio``, or over stdio with
``serve_stdio(server)``. Bearer-token authorization over HTTP: ``presa_trio.auth``. Writing a
protocol extension: ``presa_trio.extensions``.

``AsgiApp``, its ``Timeouts`` and ``serve_stdio`` are loaded when first named: a program that
embeds a server and serves it some other way never imports the HTTP or stdio edge.
``__version__`` is the installed distribution's version (``pyproject.toml`` is its one source).
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any

from ._handlers.results import ToolResult as ToolResult
from ._handlers.typeschema import Param as Param
from ._kernel.context import Context as Context
from ._kernel.requestlog import RequestFilter as RequestFilter
from ._kernel.runtime import Runtime as Runtime
from ._kernel.settings import Limits as Limits
from ._kernel.settings import Listing as Listing
from ._kernel.settings import RequestState as RequestState
from ._kernel.settings import Sessions as Sessions
from ._kernel.settings import Validation as Validation
from ._protocol.cors import Cors as Cors
from ._protocol.dialect import PROTOCOL_VERSION as PROTOCOL_VERSION
from ._protocol.headers import HostPolicy as HostPolicy
from ._protocol.request_state import KeyRing as KeyRing
from ._protocol.schema import Schemas as Schemas
from ._protocol.schema import Violation as Violation
from ._server import Server as Server
from .errors import HeaderMismatch as HeaderMismatch
from .errors import InternalError as InternalError
from .errors import InvalidParams as InvalidParams
from .errors import McpError as McpError
from .errors import MethodNotFound as MethodNotFound
from .errors import MissingCapability as MissingCapability
from .errors import ToolError as ToolError

try:
    __version__ = _version("presa_trio")
except _PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "PROTOCOL_VERSION",
    "AsgiApp",
    "Context",
    "Cors",
    "HeaderMismatch",
    "HostPolicy",
    "InternalError",
    "InvalidParams",
    "KeyRing",
    "Limits",
    "Listing",
    "McpError",
    "MethodNotFound",
    "MissingCapability",
    "Param",
    "RequestFilter",
    "RequestState",
    "Runtime",
    "Schemas",
    "Server",
    "Sessions",
    "Timeouts",
    "ToolError",
    "ToolResult",
    "Validation",
    "Violation",
    "serve_stdio",
]

if TYPE_CHECKING:
    from ._transports.asgi import AsgiApp as AsgiApp
    from ._transports.stdio import serve_stdio as serve_stdio
    from ._transports.timeouts import Timeouts as Timeouts


def __getattr__(name: str) -> Any:
    if name == "AsgiApp":
        from ._transports.asgi import AsgiApp

        return AsgiApp
    if name == "Timeouts":
        from ._transports.timeouts import Timeouts

        return Timeouts
    if name == "serve_stdio":
        from ._transports.stdio import serve_stdio

        return serve_stdio
    raise AttributeError(f"module 'presa_trio' has no attribute {name!r}")
