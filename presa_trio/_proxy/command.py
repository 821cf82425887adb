"""The ``presa-trio proxy`` command: its options, and the run that owns the process (signals,
the capture file, the exit status).

It parses and wires; forwarding lives in ``http.py`` and ``stdio.py``, recording and
checking in ``recorder.py``.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from .recorder import Recorder
    from .upstream import Upstream

DEFAULT_LISTEN = "127.0.0.1:6277"
GRACEFUL = 1.0  # seconds open streams get at shutdown before they are cut

HELP = f"""\
Put a proxy between an MCP client and server that checks every message both ways, as it
passes, against the schema, prints each finding at once on stderr (presa-trio proxy: LINE:
$def at POINTER: reason), and with --capture writes every message as one JSON line that
`presa-trio validate` reads (direction, time, connection, exchange, HTTP method, status and
headers, credentials redacted).

Streamable HTTP: --upstream URL is the server's MCP endpoint; the proxy listens on --listen
(default {DEFAULT_LISTEN}) and sends every request, whatever its path, to URL. Point the client
at http://{DEFAULT_LISTEN}/mcp. SSE streams pass event by event; sessions, Last-Event-ID and
401 challenges pass untouched. An upstream that cannot be reached is answered 502.

stdio: --stdio -- CMD ARGS spawns the server and passes lines between this process's
stdin/stdout and the server's; the server's stderr is this process's. It ends when the server
exits, with the server's exit status.

Ctrl-C (SIGINT) or SIGTERM stops it. Exit status: 0, or 1 with --check when any finding was
printed; with --stdio, otherwise the server's own status (128 + N when signal N ended it,
127 when it cannot start); 2 for a bad command line.
"""


def add_parser(commands: Any) -> None:
    """Add ``proxy`` to the ``presa-trio`` command's subparsers."""
    proxy = commands.add_parser(
        "proxy",
        help="forward MCP traffic, checking every message as it passes",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    proxy.set_defaults(run=run, command_words=[])
    mode = proxy.add_mutually_exclusive_group(required=True)
    mode.add_argument("--upstream", metavar="URL", help="the MCP endpoint to forward HTTP to")
    mode.add_argument("--stdio", action="store_true", help="spawn the stdio server given after --")
    proxy.add_argument(
        "--listen", metavar="HOST:PORT", default=DEFAULT_LISTEN,
        help=f"where to accept HTTP clients (default {DEFAULT_LISTEN})",
    )  # fmt: skip
    proxy.add_argument("--capture", metavar="FILE", help="write every message to FILE (JSON lines)")
    proxy.add_argument(
        "--check", action="store_true", help="exit status 1 at the end if anything was found"
    )
    proxy.add_argument(
        "--quiet", action="store_true", help="print no line per finding, only the count at the end"
    )


def split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """``proxy --stdio ... -- CMD ARGS``: the words for argparse, and CMD ARGS."""
    if argv[:1] == ["proxy"] and "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1 :]
    return argv, []


def run(args: argparse.Namespace) -> int:
    """Run ``presa-trio proxy``; its exit status."""
    import trio

    from .recorder import say
    from .upstream import Upstream

    command: list[str] = args.command_words
    if args.stdio and not command:
        return _refuse("--stdio needs the server's command after --: --stdio -- CMD ARGS")
    if not args.stdio and command:
        return _refuse("a command after -- is for --stdio")
    if not args.stdio:
        try:
            upstream = Upstream.parse(args.upstream)
            fd, address = _bound(args.listen)
        except ValueError as exc:
            return _refuse(str(exc))
    with ExitStack() as stack:
        capture: TextIO | None = None
        if args.capture:
            try:
                capture = stack.enter_context(open(args.capture, "w", encoding="utf-8"))
            except OSError as exc:
                return _refuse(f"cannot write {args.capture}: {exc.strerror or exc}")
        if args.stdio:
            status, recorder = trio.run(_stdio, command, capture, args.quiet)
        else:
            status, recorder = trio.run(_http, upstream, fd, address, capture, args.quiet)
    say(recorder.summary())
    if args.check and recorder.findings:
        return 1
    return status


async def _stdio(command: list[str], capture: TextIO | None, quiet: bool) -> tuple[int, Recorder]:
    from .recorder import Recorder
    from .stdio import run_stdio

    recorder = Recorder(capture, quiet=quiet)
    return await run_stdio(command, recorder), recorder


async def _http(
    upstream: Upstream, fd: int, address: str, capture: TextIO | None, quiet: bool
) -> tuple[int, Recorder]:
    """Serve the proxy on the bound socket ``fd`` until SIGINT or SIGTERM."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from .http import ProxyApp
    from .recorder import Recorder, say

    config = Config()
    config.bind = [f"fd://{fd}"]
    config.accesslog = None
    config.loglevel = "WARNING"
    config.graceful_timeout = GRACEFUL
    config.keep_alive_timeout = 5.0
    recorder = Recorder(capture, quiet=quiet)
    say(f"listening on http://{address}/mcp, forwarding to {upstream.url}")
    app: Any = ProxyApp(upstream, recorder)  # an ASGI 3 app; hypercorn's own types are narrower
    await serve(app, config, shutdown_trigger=_stopped)
    return 0, recorder


def _bound(listen: str) -> tuple[int, str]:
    """A TCP socket bound to ``listen`` (HOST:PORT, port 0 for any free one), as a file
    descriptor for hypercorn, and the address it got; ``ValueError`` when it cannot be."""
    host, _, port = listen.replace("[", "").replace("]", "").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--listen expects HOST:PORT, got {listen!r}")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
    except OSError as exc:
        sock.close()
        raise ValueError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    bound_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return sock.detach(), f"{shown}:{bound_port}"


async def _stopped() -> None:
    """Return at the first SIGINT or SIGTERM."""
    import trio

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            return


def _refuse(reason: str) -> int:
    print(f"presa-trio proxy: {reason}", file=sys.stderr)
    return 2
