"""The ``presa-trio`` command: serve a server over HTTP or stdio, or validate a capture.

It parses arguments and hands over to the transports and the capture checker; it holds no
protocol logic of its own.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import math
import os
import signal
import socket
import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

from . import _cli_client as client_commands
from ._cli_dev import add_parser as add_dev_parser
from ._cli_validate import add_parser as add_validate_parser
from ._kernel.requestlog import RequestFilter
from ._process.shutdown import DEFAULT_SECONDS, ShutdownBound
from ._proxy import add_parser as add_proxy_parser
from ._proxy import split_command as split_proxy_command
from .ext.tasks._command import add_parser as add_tasks_parser

DESCRIPTION = """\
presa-trio: serve MCP 2026-07-28 servers written with presa_trio, call any MCP server, and check
MCP traffic.

  presa-trio serve app:server --http 127.0.0.1:8000   Streamable HTTP at http://127.0.0.1:8000/mcp
  presa-trio serve app:server --workers 3 --store sqlite:///srv/presa.db
                                                      three worker processes, one shared store
  presa-trio serve app:server --stdio                 newline-delimited JSON-RPC on stdin/stdout
  presa-trio validate capture.jsonl                   check captured MCP traffic (also -, --json)
  presa-trio proxy --upstream http://127.0.0.1:8000/mcp --capture capture.jsonl
                                                      check live traffic at 127.0.0.1:6277
  presa-trio tasks --store sqlite:///srv/presa.db list
                                                      the tasks on a shared store
  presa-trio dev app:server                           serve, reloading on each save
  presa-trio list http://127.0.0.1:8000/mcp            a server's tools (--resources, --prompts)
  presa-trio call app:server forecast city=Paris      call a tool (also --stdio -- CMD ARGS)
  presa-trio read app:server weather://stations       read a resource

MODULE:SERVER names a presa_trio Server (or its ASGI app) importable from the current
directory, e.g. examples.weather:server.
"""

SERVE_HELP = """\
Serve MODULE:SERVER. --http runs hypercorn's trio worker in this process (loopback only unless
you pass another host on purpose); --stdio reads requests from stdin and writes responses to
stdout, logging to stderr, and exits at end of input. --workers N runs N such worker
processes on one listening socket under a supervisor that restarts a worker that dies, stops
them all within --shutdown-timeout at SIGTERM/SIGINT, and exits non-zero if it gives up; the
workers share their state through --store (SQLite or PostgreSQL).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="presa-trio",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"presa-trio {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="serve a server over HTTP or stdio",
        description=SERVE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("target", metavar="MODULE:SERVER", help="e.g. examples.weather:server")
    mode = serve.add_mutually_exclusive_group()
    mode.add_argument(
        "--http",
        metavar="HOST:PORT",
        nargs="?",
        const="127.0.0.1:8000",
        help="serve Streamable HTTP (default 127.0.0.1:8000; the default mode)",
    )
    mode.add_argument("--stdio", action="store_true", help="serve on stdin/stdout")
    serve.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    serve.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        metavar="N",
        help="run N worker processes on one socket, restarted when one dies (needs a shared "
        "--store when N > 1; default: this one process)",
    )
    # Given by the supervisor to its workers: the pipe whose closing means it is gone.
    serve.add_argument("--supervisor-fd", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--log-level", default="warning", help="stderr log level (default warning)")
    serve.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        default=None,
        help="a Host name (and origin host) to accept besides the loopback names, for a "
        "server reached by a public name; repeatable, or comma-separated in "
        "$PRESA_ALLOWED_HOSTS. Without it every non-loopback Host is refused with 403",
    )
    serve.add_argument(
        "--state-key",
        action="append",
        metavar="ID:HEX",
        default=None,
        help="a requestState key (at least 16 bytes, hex); the first signs, all verify, so "
        "rotate by putting the new one first; repeatable, or comma-separated in "
        "$PRESA_STATE_KEYS (default: the server's own, or the one its shared store keeps)",
    )
    serve.add_argument(
        "--cors",
        action="store_true",
        help="answer browsers' CORS preflights, for the origins admission allows (loopback, "
        "and the --allow-host names)",
    )
    serve.add_argument(
        "--max-body",
        type=int,
        metavar="BYTES",
        default=None,
        help="largest request body accepted (default 4 MiB; more is 413)",
    )
    serve.add_argument(
        "--store",
        metavar="URL",
        default=None,
        help="the state this server's workers share: memory: (the default) or "
        "sqlite:///ABSOLUTE/PATH.db (default: $PRESA_STORE, else the server's own setting)",
    )
    limits = serve.add_argument_group(
        "deadlines (seconds)", "Every connection and the process itself are released in time."
    )
    limits.add_argument(
        "--shutdown-timeout",
        type=float,
        default=DEFAULT_SECONDS,
        metavar="S",
        help="after SIGTERM/SIGINT (or end of stdin), the process is gone within S seconds, "
        "whatever still runs (default 10); requests in flight get half of it",
    )
    limits.add_argument(
        "--read-timeout",
        type=float,
        default=None,
        metavar="S",
        help="hypercorn's read timeout: a connection the client is silent on for S seconds is "
        "closed, also while a listen stream or a slow answer is being sent, so leave it unset "
        "unless every answer is quick (default: none; slow headers are already closed by "
        "--keep-alive, whose timer runs until a request head is complete)",
    )
    limits.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="a request body must arrive within S seconds, or 408 (default 30)",
    )
    limits.add_argument(
        "--write-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="a client that reads nothing for S seconds is dropped (default 30): the app's "
        "write deadline, and the kernel's TCP_USER_TIMEOUT on the listening socket where the "
        "platform has it (hypercorn shields its socket writes from the app)",
    )
    limits.add_argument(
        "--keep-alive",
        type=float,
        default=5.0,
        metavar="S",
        help="an idle keep-alive connection is closed after S seconds (default 5)",
    )
    add_validate_parser(commands)
    add_tasks_parser(commands)
    add_dev_parser(commands)
    add_proxy_parser(commands)
    client_commands.add_parsers(commands)
    return parser


def load_target(spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"presa-trio: expected MODULE:SERVER, got {spec!r}")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemExit(f"presa-trio: cannot import {module_name!r}: {exc}") from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise SystemExit(f"presa-trio: {module_name!r} has no {attribute!r}") from None
    return target


def _servable(target: Any) -> Any:
    from ._server import Server
    from ._transports.asgi import AsgiApp

    if isinstance(target, Server | AsgiApp):
        return target
    raise SystemExit(f"presa-trio: {type(target).__name__} is not a presa_trio Server")


def serve(args: argparse.Namespace) -> int:
    import trio

    from ._protocol.headers import LOOPBACK_HOSTS, HostPolicy
    from ._transports.asgi import AsgiApp
    from ._transports.timeouts import Timeouts

    _log_to_stderr(args)
    target = _servable(load_target(args.target))
    store = _store(args, target)
    if args.workers is not None:
        return supervise(args, target, store)
    bound = ShutdownBound(args.shutdown_timeout)
    if args.stdio:
        from ._transports.stdio import serve_stdio

        keys = _state_keys(args)
        if (store is not None or keys is not None) and not isinstance(target, AsgiApp):
            target = target.asgi_app(backend=store, state_keys=keys)
        trio.run(partial(serve_stdio, target, on_eof=bound.start))
        bound.cancel()
        return 0
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    bind = args.http or "127.0.0.1:8000"
    config.bind = [_listening(bind, args.write_timeout)]
    config.accesslog = None
    config.graceful_timeout = args.shutdown_timeout / 2
    config.read_timeout = args.read_timeout
    config.keep_alive_timeout = args.keep_alive
    if isinstance(target, AsgiApp):
        app: Any = target
    else:
        # The process's shutdown bound is ``bound``, this command's: the app gets none.
        hosts = _allowed_hosts(args)
        app = target.asgi_app(
            path=args.path,
            max_body=args.max_body,
            host_policy=HostPolicy(allowed_hosts=LOOPBACK_HOSTS | hosts) if hosts else None,
            timeouts=Timeouts(body=args.body_timeout, write=args.write_timeout),
            cors=args.cors,
            backend=store,
            state_keys=_state_keys(args),
        )
    if args.supervisor_fd is None:
        print(f"presa-trio: serving at http://{bind}{app.path}", file=sys.stderr)
    stopped = partial(_until_stopped, app, bound, args.supervisor_fd)
    trio.run(partial(hypercorn_serve, app, config, shutdown_trigger=stopped))
    bound.cancel()
    return 0


def _log_to_stderr(args: argparse.Namespace) -> None:
    """presa_trio's log records on stderr (stdout is for MCP messages only); a worker of
    ``--workers`` names its pid."""
    worker = " pid %(process)d" if args.supervisor_fd is not None else ""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            f"%(asctime)s %(levelname)s %(name)s{worker} "
            "[%(mcp_method)s %(request_id)s]: %(message)s"
        )
    )
    handler.addFilter(RequestFilter())
    presa_logger = logging.getLogger("presa_trio")
    presa_logger.addHandler(handler)
    presa_logger.setLevel(args.log_level.upper())


def supervise(args: argparse.Namespace, target: Any, store: str | None) -> int:
    """``--workers N``: bind the socket here, then run N workers on it under a supervisor
    (``presa_trio._process.supervisor``) until SIGTERM/SIGINT; its exit status."""
    import trio

    from ._backends.protocol import parse_url
    from ._process.supervisor import Supervisor
    from ._server import Server

    if args.stdio:
        return _refuse("--workers is for --http; stdio is served by one process")
    if args.workers > 1 and isinstance(target, Server):
        url = store or target.settings.backend
        if url is None or parse_url(url).scheme == "memory":
            return _refuse(
                f"--workers {args.workers} needs a store the workers share (--store "
                "sqlite:///ABSOLUTE/PATH.db or postgresql://...): in memory, each worker "
                "would keep tasks the others cannot see"
            )
    _state_keys(args)  # a malformed key is refused here, once, not by every worker
    bind = args.http or "127.0.0.1:8000"
    if bind.startswith("unix:"):
        return _refuse("--workers listens on HOST:PORT or fd://N, not on a unix: socket")
    listening = _listening(bind, args.write_timeout)  # fd://N: bound here, or given so
    fd = int(listening.removeprefix("fd://"))
    _listen(fd)
    watch, held = os.pipe()  # the workers read ``watch``; ``held`` closes with this process
    path = args.path if isinstance(target, Server) else target.path
    print(
        f"presa-trio: serving at http://{bind}{path} with {args.workers} worker(s) "
        f"(supervisor pid {os.getpid()})",
        file=sys.stderr,
    )
    if args.state_key:  # the workers read them from the environment, not their argv
        os.environ["PRESA_STATE_KEYS"] = ",".join(args.state_key)
    supervisor = Supervisor(
        worker_argv(args, listening, watch),
        args.workers,
        pass_fds=(fd, watch),
        shutdown_timeout=args.shutdown_timeout,
    )
    try:
        return trio.run(supervisor.run)
    finally:
        os.close(held)
        os.close(watch)
        os.close(fd)


def _refuse(reason: str) -> int:
    """A command line that cannot be served: one line on stderr, exit status 2."""
    print(f"presa-trio: {reason}", file=sys.stderr)
    return 2


def _listen(fd: int) -> None:
    """Start listening on the bound socket ``fd`` now, so connections wait in its queue
    while no worker runs (at start, or while a lost one is replaced)."""
    sock = socket.socket(fileno=fd)
    try:
        sock.listen(socket.SOMAXCONN)
    finally:
        sock.detach()


def worker_argv(args: argparse.Namespace, bind: str, supervisor_fd: int) -> list[str]:
    """The command line of one worker of ``--workers``: ``serve`` as given, on ``bind`` (the
    supervisor's socket, ``fd://N``), told the supervisor's pipe. State keys travel in the
    environment."""
    argv = [sys.executable, "-m", "presa_trio", "serve", args.target, "--http", bind]
    argv += ["--supervisor-fd", str(supervisor_fd), "--path", args.path]
    argv += ["--log-level", args.log_level]
    for name in args.allow_host or ():
        argv += ["--allow-host", name]
    if args.cors:
        argv.append("--cors")
    if args.max_body is not None:
        argv += ["--max-body", str(args.max_body)]
    if args.store is not None:
        argv += ["--store", args.store]
    for option in ("shutdown_timeout", "read_timeout", "body_timeout", "write_timeout"):
        value = getattr(args, option)
        if value is not None:
            argv += ["--" + option.replace("_", "-"), repr(value)]
    argv += ["--keep-alive", repr(args.keep_alive)]
    return argv


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("at least 1")
    return value


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("presa_trio")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _allowed_hosts(args: argparse.Namespace) -> frozenset[str]:
    """``--allow-host`` names, else ``$PRESA_ALLOWED_HOSTS`` (comma-separated), lowercased."""
    names = args.allow_host or os.environ.get("PRESA_ALLOWED_HOSTS", "").split(",")
    return frozenset(n.strip().lower() for n in names if n.strip())


def _state_keys(args: argparse.Namespace) -> Any:
    """``--state-key ID:HEX`` values, else ``$PRESA_STATE_KEYS``, as a ``KeyRing`` (None when
    neither is given); a malformed key is one line and exit status 2."""
    from ._protocol.request_state import KeyRing

    given = args.state_key or os.environ.get("PRESA_STATE_KEYS", "").split(",")
    pairs = [item.strip() for item in given if item.strip()]
    if not pairs:
        return None
    try:
        keys = []
        for pair in pairs:
            key_id, _, hex_key = pair.partition(":")
            keys.append((key_id, bytes.fromhex(hex_key)))
        return KeyRing(keys)
    except ValueError:
        print(
            "presa-trio: a state key is ID:HEX, the id without '.', the key at least "
            "16 bytes of hex",
            file=sys.stderr,
        )
        raise SystemExit(2) from None


def _store(args: argparse.Namespace, target: Any) -> str | None:
    """The backend URL to serve with (``--store``, else ``$PRESA_STORE``), checked by
    opening it now: a bad one is one line on stderr and exit status 2, before anything
    listens. A target that is an app already chose its backend itself."""
    from ._server import Server
    from .backends import ENVIRONMENT_VARIABLE, BackendError, check_url

    store = args.store or os.environ.get(ENVIRONMENT_VARIABLE) or None
    if args.store is not None and not isinstance(target, Server):
        raise SystemExit("presa-trio: --store needs MODULE:SERVER to name a Server, not an app")
    url = store if isinstance(target, Server) and store else None
    if url is None:
        url = target.settings.backend if isinstance(target, Server) else store
    if url:
        try:
            check_url(url)
        except BackendError as exc:
            print(f"presa-trio: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
    return store if isinstance(target, Server) else None


def _listening(bind: str, write_timeout: float) -> str:
    """``bind`` as hypercorn's ``fd://N``: a TCP socket bound here, so that it can carry
    ``TCP_USER_TIMEOUT``, which every accepted connection inherits. hypercorn writes to its
    sockets inside a shielded scope, so the app's own write deadline cannot interrupt a send
    to a client that stopped reading; the kernel can: once sent data has gone unacknowledged
    for that long (a zero receive window included) it aborts the connection, the send fails
    and hypercorn releases the connection. A ``unix:`` or ``fd://`` bind is left as it is.
    """
    if bind.startswith(("unix:", "fd://")):
        return bind
    host, _, port = bind.replace("[", "").replace("]", "").rpartition(":")
    try:
        address = (host, int(port))
    except ValueError:
        raise SystemExit(f"presa-trio: --http expects HOST:PORT, got {bind!r}") from None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        user_timeout = getattr(socket, "TCP_USER_TIMEOUT", None)
        if user_timeout is not None and math.isfinite(write_timeout) and write_timeout > 0:
            sock.setsockopt(socket.IPPROTO_TCP, user_timeout, max(1, int(write_timeout * 1000)))
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise SystemExit(f"presa-trio: cannot listen on {bind}: {exc.strerror}") from None
    return f"fd://{sock.detach()}"


async def _until_stopped(app: Any, bound: ShutdownBound, supervisor_fd: int | None) -> None:
    """Return at the first SIGINT or SIGTERM (or, in a worker of ``--workers``, once its
    supervisor is gone), after draining the app: listen streams end with their final result
    and no new tasks are admitted before hypercorn's graceful timeout starts, so nothing is
    cut off by it; from now on the process has ``--shutdown-timeout``.

    Handled explicitly (not as KeyboardInterrupt) so the server also stops cleanly when it
    was started with SIGINT ignored, as background jobs are.
    """
    import trio

    from ._process.supervisor import until_orphaned

    async def on_signal(done: trio.CancelScope) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                done.cancel()

    async def on_orphaned(fd: int, done: trio.CancelScope) -> None:
        await until_orphaned(fd)
        logging.getLogger("presa_trio.supervisor").error(
            "the supervisor is gone; this worker stops"
        )
        done.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(on_signal, nursery.cancel_scope)
        if supervisor_fd is not None:
            nursery.start_soon(on_orphaned, supervisor_fd, nursery.cancel_scope)
    bound.start()
    app.begin_shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    argv, spawned = client_commands.split_command(sys.argv[1:] if argv is None else argv)
    argv, proxied = split_proxy_command(argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if proxied:
        args.command_words = proxied
    if args.command in ("list", "call", "read"):
        return client_commands.run(args, extra, spawned, load_target)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if "run" in args:  # a command in a module of its own (validate, tasks, dev, proxy)
        return int(args.run(args))
    return serve(args)
