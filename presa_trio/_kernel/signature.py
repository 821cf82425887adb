"""How a handler is called: its hints resolved once, for its schemas, its argument conversion
and its prompt arguments, and sync handlers run in worker threads.

One module decides which parameter takes the ``Context`` (the only such detector), which take
arguments, and how to call the function; ``_handlers.typeschema`` turns the annotations it
hands over into JSON Schema and ``_handlers.convert`` arguments into the hinted types. It does
not validate arguments (the registry does, against the schema).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, final

import trio

from .._handlers.convert import Binder
from .._handlers.outputschema import output_shape
from .._handlers.results import ToolResult
from .._handlers.typeschema import EMPTY, parameters_schema
from .context import Context, serve_mounted

Handler = Callable[..., Any]
_PLAIN = frozenset({str, dict, list, int, float, bool, type(None)})  # never awaitable


def _hints(fn: Handler) -> dict[str, Any]:
    """Resolved hints; when some name does not resolve, the others still do (it stays a str)."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except NameError:
        pass
    except Exception:  # an annotation that is not a type at all: keep the raw annotations
        return dict(getattr(inspect.unwrap(fn), "__annotations__", {}))
    target = inspect.unwrap(fn)
    namespace = getattr(target, "__globals__", {})
    hints: dict[str, Any] = {}
    for name, annotation in getattr(target, "__annotations__", {}).items():
        probe = types.SimpleNamespace(__annotations__={name: annotation})
        try:
            hints[name] = typing.get_type_hints(probe, namespace, include_extras=True)[name]
        except NameError:
            hints[name] = annotation
    return hints


def is_context(annotation: object) -> bool:
    """Is this the ``Context`` annotation? presa_trio's class (or a subclass), or a name that
    did not resolve (imported only under ``TYPE_CHECKING``) whose last part is ``Context``.

    A resolved class of your own that happens to be called ``Context`` is not it: it is an
    ordinary argument, in the schema and required like any other.
    """
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        return annotation.rpartition(".")[2] == "Context"
    return isinstance(annotation, type) and issubclass(annotation, Context)


def _is_async(fn: Handler) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


@final
@dataclass(frozen=True, slots=True)
class Signature:
    """A handler's calling convention, read once when it is declared.

    ``parameters`` are the argument parameters as ``(name, annotation, default)``, in order,
    without the ``Context`` one and without ``*args``/``**kwargs``; ``binder`` turns
    arguments into the keyword arguments ``call`` takes.
    """

    fn: Handler
    label: str
    context_param: str | None
    parameters: tuple[tuple[str, object, object], ...]
    var_keyword: bool
    returns: object
    is_async: bool
    binder: Binder
    #: The mounted server whose handler this is (``Server.mount``), or None: its
    #: ``ctx.lifespan`` is then what that server's lifespan yielded.
    mounted_from: object = None

    @classmethod
    def of(cls, fn: Handler) -> Signature:
        hints = _hints(fn)
        context_param = None
        parameters: list[tuple[str, object, object]] = []
        var_keyword = False
        for param in inspect.signature(fn).parameters.values():
            annotation = hints.get(param.name, Any)
            if param.kind is param.VAR_KEYWORD:
                var_keyword = True
            elif param.kind is param.VAR_POSITIONAL:
                continue
            elif is_context(annotation):
                context_param = param.name
            else:
                parameters.append((param.name, annotation, param.default))
        label = getattr(fn, "__qualname__", repr(fn))
        return cls(
            fn=fn,
            label=label,
            context_param=context_param,
            parameters=tuple(parameters),
            var_keyword=var_keyword,
            returns=hints.get("return", EMPTY),
            is_async=_is_async(fn),
            binder=Binder(parameters, var_keyword, label),
        )

    @property
    def names(self) -> frozenset[str]:
        return frozenset(name for name, _, _ in self.parameters)

    def input_schema(self) -> dict[str, Any]:
        """The ``inputSchema`` of a tool: one property per argument parameter."""
        return parameters_schema(self.parameters, self.label)

    def output_schema(self) -> dict[str, Any] | None:
        """An ``outputSchema`` when the return annotation is data (see outputschema)."""
        return self.output_shape()[0]

    def output_shape(self) -> tuple[dict[str, Any] | None, bool]:
        """The ``outputSchema`` and whether results are wrapped as ``{"result": value}``."""
        if self.returns is ToolResult:  # the whole result, written by hand
            return None, False
        return output_shape(self.returns)

    def prompt_arguments(self) -> list[dict[str, Any]]:
        """Prompt arguments: every argument parameter is a string argument."""
        found: list[dict[str, Any]] = []
        for name, _, default in self.parameters:
            argument: dict[str, Any] = {"name": name}
            if default is EMPTY:
                argument["required"] = True
            found.append(argument)
        return found

    def with_context(self, ctx: Context, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` (from ``binder``) with what this adds: the handler's ``Context``
        argument (a mounted server's handler also gets its lifespan served)."""
        if self.context_param is not None:
            if self.mounted_from is not None:
                serve_mounted(ctx, self.mounted_from)
            kwargs[self.context_param] = ctx
        return kwargs

    async def call(self, ctx: Context, kwargs: dict[str, Any], *, thread: bool) -> Any:
        """Call the handler with ``ctx`` and ``kwargs`` (from ``binder``; this adds to them).

        A sync handler runs in a worker thread when ``thread`` is true, bounded by the run's
        threads and by its principal's share of them (``Runtime.threads``), so it cannot
        block the event loop. Cancellation abandons the thread: the request (or task) ends at
        once, the function runs to its end on its own, its result is discarded, and it keeps
        its place in both bounds until it returns.
        """
        kwargs = self.with_context(ctx, kwargs)
        if self.is_async:
            return await self.fn(**kwargs)
        limiter = thread_limiter(ctx, thread)
        return await call_sync(self.fn, (), kwargs, thread=thread, limiter=limiter)


def thread_limiter(ctx: Context, thread: bool) -> trio.CapacityLimiter:
    """What bounds a sync handler's worker thread: the run's threads, and the share of the
    request's principal (asked for only when a thread is wanted; the anonymous principal ""
    holds no share)."""
    runtime = ctx.runtime
    principal = ctx.principal if thread else ""
    return runtime.threads.limiter_for(principal) if principal else runtime.thread_limiter


async def call_sync(
    fn: Handler,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    thread: bool,
    limiter: trio.CapacityLimiter,
) -> Any:
    """``fn(*args, **kwargs)`` for a sync handler: in a worker thread bounded by ``limiter``
    when ``thread`` is true (see ``Signature.call``), else at once unless already cancelled.

    A sync callable may hand back an awaitable (a plain ``def`` decorator around an async
    function, say): it is awaited here, on the event loop. A worker thread hands it back in
    a tuple, as trio refuses a coroutine for what a thread returns.
    """
    if thread:
        boxed = partial(_boxed, fn, args, kwargs)
        (result,) = await trio.to_thread.run_sync(boxed, abandon_on_cancel=True, limiter=limiter)
    else:
        await trio.lowlevel.checkpoint_if_cancelled()
        result = fn(*args, **kwargs)
    if type(result) not in _PLAIN and inspect.isawaitable(result):  # plain: no ABC check
        result = await result
    return result


def _boxed(fn: Handler, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any]:
    return (fn(*args, **kwargs),)


def input_schema_for(fn: Handler) -> dict[str, Any]:
    """The ``inputSchema`` a tool declared as ``fn`` gets."""
    return Signature.of(fn).input_schema()


def output_schema_for(fn: Handler) -> dict[str, Any] | None:
    """The ``outputSchema`` a tool declared as ``fn`` gets, or None."""
    return Signature.of(fn).output_schema()
