"""``presa-trio dev``: serve a server while you edit it, restarting it on each save.

This process speaks no MCP: it binds the port once, watches the module's folder for saved
``*.py`` files (inotify where there is one, a look every half second elsewhere), and runs
``presa-trio serve`` as a child on the bound socket, with a line per request at info level.
On a save it stops the child as SIGTERM stops a server (drained, bounded by
``--shutdown-timeout``), then starts a fresh one; a child that cannot start (an import or
syntax error) prints why, and the next save tries again. What it does not do: reload in
place (each start is a new process: nothing of the old one survives), or watch anything but
Python files under the module's folder.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Any

import trio

from ._backends.dir_watch import IN_SAVED, DirectoryWatch
from ._process.supervisor import KILL_GRACE, describe

#: Seconds of quiet after a save before the restart: an editor's burst of writes (or a
#: checkout of many files) is one restart.
DEBOUNCE = 0.1
POLL = 0.5  # seconds between looks where there is no inotify
SKIPPED = ("__pycache__", "node_modules", "site-packages")  # folders never watched
INSPECTOR = "npx @modelcontextprotocol/inspector@2.12.0 --cli {url} --transport http"

HELP = """\
Serve MODULE:SERVER over Streamable HTTP for development: the server restarts whenever a
.py file under the module's folder is saved (a task still running is stopped as at any
shutdown: recorded failed, "The server stopped before the task finished"), each request is
logged in one line, and the URL and an MCP Inspector command that connects to it are
printed. A server that fails to import prints its error; the next save tries again.
Ctrl-C (or SIGTERM) stops it.
"""

Snapshot = dict[str, tuple[int, int]]  # path -> (mtime_ns, size) of every watched .py file


def add_parser(commands: Any) -> None:
    """Add ``dev`` to the ``presa-trio`` command's subparsers."""
    dev = commands.add_parser(
        "dev",
        help="serve with reload on save, for development",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dev.set_defaults(run=run)
    dev.add_argument("target", metavar="MODULE:SERVER", help="e.g. app:server")
    dev.add_argument(
        "--http", metavar="HOST:PORT", default="127.0.0.1:8000", help="(default 127.0.0.1:8000)"
    )
    dev.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    dev.add_argument("--store", metavar="URL", default=None, help="as for serve")
    dev.add_argument("--log-level", default="info", help="stderr log level (default info)")
    dev.add_argument(
        "--shutdown-timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="a restart stops the old server within S seconds (default 5)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``presa-trio dev``; its exit status (0 after Ctrl-C or SIGTERM)."""
    module_name, _, attribute = args.target.partition(":")
    if not module_name or not attribute:
        return _refuse(f"expected MODULE:SERVER, got {args.target!r}")
    folder = _folder_of(module_name)
    if folder is None:
        return _refuse(f"cannot find the module {module_name!r} from {os.getcwd()}")
    try:
        sock = _bound(args.http)
    except (OSError, ValueError) as exc:
        return _refuse(f"cannot listen on {args.http}: {exc}")
    url = f"http://{args.http}{args.path}"
    print(f"presa-trio dev: serving {args.target} at {url}", file=sys.stderr)
    print(f"presa-trio dev: restarting when a .py file under {folder} is saved", file=sys.stderr)
    print(f"presa-trio dev: inspect it with {INSPECTOR.format(url=url)} --method tools/list",
          file=sys.stderr, flush=True)  # fmt: skip
    reloader = _Reloader(args, folder, sock)
    try:
        return trio.run(reloader.run)
    finally:
        reloader.close()


class _Reloader:
    """Runs the server as a child until a save, then again, until SIGINT/SIGTERM.

    The listening socket is this process's: a restart keeps it, so connections made
    meanwhile wait in its queue for the next server. While no server can start (an import
    error), it is closed, and connections are refused rather than left waiting; the next
    start listens again.
    """

    def __init__(self, args: argparse.Namespace, folder: str, sock: socket.socket) -> None:
        self.args = args
        self.folder = folder
        self.sock: socket.socket | None = sock
        # The child stops by itself when this process is gone: it holds ``watch`` of a
        # pipe whose other end, ``held``, closes only with this process.
        self.watch, self.held = os.pipe()

    def close(self) -> None:
        os.close(self.held)
        os.close(self.watch)
        if self.sock is not None:
            self.sock.close()

    async def run(self) -> int:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._serve_until_saved_again)
                async for _ in signals:
                    nursery.cancel_scope.cancel()
        print("presa-trio dev: stopped", file=sys.stderr)
        return 0

    async def _serve_until_saved_again(self) -> None:
        watch = DirectoryWatch.open(self.folder, IN_SAVED)
        try:
            seen = await trio.to_thread.run_sync(self._snapshot, watch)
            while True:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._child)
                    seen = await self._until_saved(watch, seen)
                    nursery.cancel_scope.cancel()  # the child is stopped on the way out
                print("presa-trio dev: a file was saved; restarting", file=sys.stderr)
        finally:
            if watch is not None:
                watch.close()

    async def _child(self) -> None:
        """One server process, until it exits or this is cancelled: then it gets SIGTERM and
        its shutdown bound, and is killed past that."""
        await trio.lowlevel.checkpoint()
        if self.sock is None:
            try:
                self.sock = _bound(self.args.http)
            except (OSError, ValueError) as exc:
                print(f"presa-trio dev: cannot listen on {self.args.http}: {exc}; waiting "
                      "for a save", file=sys.stderr, flush=True)  # fmt: skip
                return
        fd = self.sock.fileno()
        process = await trio.lowlevel.open_process(
            _child_argv(self.args, fd, self.watch),
            pass_fds=(fd, self.watch),
            start_new_session=True,
        )
        try:
            returncode = await process.wait()
        finally:
            if process.returncode is None:
                with trio.CancelScope(shield=True):
                    process.send_signal(signal.SIGTERM)
                    with trio.move_on_after(self.args.shutdown_timeout + KILL_GRACE):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
        self.sock.close()  # refuse connections until a server runs again
        self.sock = None
        print(f"presa-trio dev: the server {describe(returncode)}; waiting for a save",
              file=sys.stderr, flush=True)  # fmt: skip

    async def _until_saved(self, watch: DirectoryWatch | None, seen: Snapshot) -> Snapshot:
        """Until a .py file is saved (its snapshot changes), after a quiet ``DEBOUNCE``;
        the new snapshot."""
        while True:
            if watch is None:
                await trio.sleep(POLL)
            else:
                await watch.written()
                while True:  # a burst of writes is one save
                    with trio.move_on_after(DEBOUNCE) as quiet:
                        await watch.written()
                    if quiet.cancelled_caught:
                        break
            now = await trio.to_thread.run_sync(self._snapshot, watch)
            if now != seen:
                return now

    def _snapshot(self, watch: DirectoryWatch | None) -> Snapshot:
        """Every .py file under the folder with its mtime and size; new folders are watched
        as they are found. In a worker thread."""
        found: Snapshot = {}
        for directory in _folders(self.folder):
            if watch is not None:
                watch.add(directory)
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                if entry.name.endswith(".py") and entry.is_file():
                    with contextlib.suppress(FileNotFoundError):  # deleted meanwhile
                        stat = entry.stat()
                        found[entry.path] = (stat.st_mtime_ns, stat.st_size)
        return found


def _folders(root: str) -> Iterator[str]:
    """``root`` and its folders, but for hidden ones, caches and virtual environments."""
    for directory, subdirectories, _ in os.walk(root):
        subdirectories[:] = [
            name
            for name in subdirectories
            if not name.startswith(".")
            and name not in SKIPPED
            and not os.path.exists(os.path.join(directory, name, "pyvenv.cfg"))
        ]
        yield directory


def _folder_of(module_name: str) -> str | None:
    """The folder to watch: the top package's (or the module's, for a plain module),
    found without importing it."""
    if "" not in sys.path:
        sys.path.insert(0, "")
    top = module_name.partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return os.path.abspath(next(iter(spec.submodule_search_locations)))
    if spec.origin is None or not os.path.isfile(spec.origin):
        return None
    return os.path.dirname(os.path.abspath(spec.origin))


def _bound(bind: str) -> socket.socket:
    """A listening TCP socket on ``bind`` (HOST:PORT), held across restarts: connections
    made while the server restarts wait in its queue."""
    host, _, port = bind.replace("[", "").replace("]", "").rpartition(":")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    os.set_inheritable(sock.fileno(), True)
    return sock


def _child_argv(args: argparse.Namespace, fd: int, watch_fd: int) -> list[str]:
    argv = [sys.executable, "-m", "presa_trio", "serve", args.target, "--http", f"fd://{fd}"]
    argv += ["--path", args.path, "--log-level", args.log_level, "--supervisor-fd", str(watch_fd)]
    argv += ["--shutdown-timeout", repr(args.shutdown_timeout)]
    if args.store is not None:
        argv += ["--store", args.store]
    return argv


def _refuse(reason: str) -> int:
    print(f"presa-trio dev: {reason}", file=sys.stderr)
    return 2
