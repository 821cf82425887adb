"""``presa-trio tasks``: an operator's view of the tasks on a shared store, while servers run.

It parses the command line, runs one ``_operator`` call, and prints a table (or JSON with
``--json``); every failure is one line on stderr and an exit status (``EXIT_*``). It holds no
store logic of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

import trio

from ...backends import (
    DEFAULT_LEASE,
    ENVIRONMENT_VARIABLE,
    BackendError,
    SqlDatabase,
    StorageUnavailable,
    open_database,
    parse_url,
)
from . import _operator
from ._operator import Filters, NotAStore, Stats
from ._states import Status, TaskRecord

EXIT_UNKNOWN = 1  # no task has that id
EXIT_UNUSABLE = 2  # the command line, or the store, cannot be used
EXIT_ENDED = 3  # cancel: the task has ended already

HELP = """\
Read and steer the tasks of every server on a shared store (sqlite:///PATH.db or
postgresql://...), with or without servers running: list, show, cancel, stats. The store's
credentials are the trust boundary: this command sees every principal's tasks.

  presa-trio tasks --store sqlite:///srv/presa.db list --status working --older-than 10m
  presa-trio tasks --store sqlite:///srv/presa.db show TASK_ID
  presa-trio tasks --store sqlite:///srv/presa.db cancel TASK_ID
  presa-trio tasks --store sqlite:///srv/presa.db stats --json

Exit status: 0 done; 1 no task has that id; 2 a bad command line, or a store that cannot be
opened or read; 3 cancel of a task that has ended already.
"""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def add_parser(commands: Any) -> None:
    """Add ``tasks`` and its subcommands to the ``presa-trio`` command's subparsers."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        metavar="URL",
        default=argparse.SUPPRESS,
        help=f"the shared store (default: ${ENVIRONMENT_VARIABLE})",
    )
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print JSON, not a table")
    tasks = commands.add_parser(
        "tasks",
        parents=[common],
        help="list, show and cancel the tasks on a shared store",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tasks.set_defaults(run=run)
    actions = tasks.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list", parents=[common, output], help="the stored tasks, oldest first"
    )
    listing.add_argument(
        "--status",
        action="append",
        choices=[status.value for status in Status],
        help="only tasks in this status (repeatable)",
    )
    listing.add_argument("--principal", help="only this principal's tasks")
    listing.add_argument("--tool", help="only tasks of this tool")
    listing.add_argument(
        "--older-than",
        type=_duration,
        metavar="AGE",
        help="only tasks created at least AGE ago: seconds, or with s, m, h or d",
    )
    listing.add_argument(
        "--limit", type=_positive, default=100, help="at most N, the newest (default 100)"
    )
    for name, what in (
        ("show", "one task: its record, questions, result or error"),
        ("cancel", "cancel a task where it runs, as tasks/cancel does"),
    ):
        action = actions.add_parser(name, parents=[common, output], help=what)
        action.add_argument("task_id", metavar="TASK_ID")
    actions.add_parser(
        "stats",
        parents=[common, output],
        help="counts per status and principal, the oldest unfinished task, lost workers",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``presa-trio tasks ACTION``; its exit status."""
    url = getattr(args, "store", None) or os.environ.get(ENVIRONMENT_VARIABLE)
    if not url:
        return _fail(f"give the shared store: --store URL or ${ENVIRONMENT_VARIABLE}")
    action: Callable[[argparse.Namespace, str, SqlDatabase], Any] = _ACTIONS[args.action]
    try:
        return trio.run(partial(_with_database, action, args, url))
    except (BackendError, NotAStore) as exc:
        return _fail(str(exc))
    except StorageUnavailable as exc:
        return _fail(f"the store failed: {exc.reason}")


async def _with_database(action: Any, args: argparse.Namespace, url: str) -> int:
    async with open_database(url) as db:
        status: int = await action(args, url, db)
        return status


async def _list(args: argparse.Namespace, url: str, db: SqlDatabase) -> int:
    filters = Filters(
        _operator.statuses(args.status or ()), args.principal, args.tool, args.older_than
    )
    found = await _operator.listing(db, filters, args.limit)
    now = _operator.now_ms()
    if args.json:
        _print_json({"tasks": [_summary(record, now) for record in found]})
        return 0
    rows = [
        [r.task_id, r.status.value, r.principal, r.tool, _age(now - r.created_ms), r.owner]
        for r in found
    ]
    _print_table(["TASK ID", "STATUS", "PRINCIPAL", "TOOL", "AGE", "OWNER"], rows)
    if not found:
        print("no tasks")
    return 0


async def _show(args: argparse.Namespace, url: str, db: SqlDatabase) -> int:
    record = await _operator.find(db, args.task_id)
    if record is None:
        return _unknown(args.task_id)
    now = _operator.now_ms()
    detail = _detail(record, now)
    if args.json:
        _print_json(detail)
        return 0
    for key in ("taskId", "status", "statusMessage", "principal", "tool", "owner",
                "createdAt", "lastUpdatedAt", "ttlMs", "expired"):  # fmt: skip
        print(f"{key + ':':15} {detail[key]}")
    for key in ("inputRequests", "result", "error"):
        if detail.get(key):
            print(f"{key}:")
            print(json.dumps(detail[key], indent=2, ensure_ascii=False))
    return 0


async def _cancel(args: argparse.Namespace, url: str, db: SqlDatabase) -> int:
    record = await _operator.find(db, args.task_id)
    if record is None or record.expired(_operator.now_ms()):
        return _unknown(args.task_id)
    if record.terminal:
        print(f"presa-trio: task {record.task_id} is already {record.status.value}",
              file=sys.stderr)  # fmt: skip
        return EXIT_ENDED
    done = await _operator.cancel(url, record)
    after = done.record
    if args.json:
        _print_json({**_summary(after, _operator.now_ms()),
                     "acknowledgedMs": round(done.seconds * 1000, 3)})  # fmt: skip
    else:
        print(f"task {after.task_id}: {after.status.value} "
              f"(acknowledged in {done.seconds * 1000:.0f} ms)")  # fmt: skip
    return 0


async def _stats(args: argparse.Namespace, url: str, db: SqlDatabase) -> int:
    lease = parse_url(url).number("lease", DEFAULT_LEASE)
    found = await _operator.stats(db, lease)
    now = _operator.now_ms()
    if args.json:
        _print_json(_stats_json(found, now))
        return 0
    print(f"{found.total} task(s): "
          + ", ".join(f"{n} {status}" for status, n in found.by_status.items()))  # fmt: skip
    statuses = list(found.by_status)
    rows = [[p, *(str(counts.get(s, 0)) for s in statuses)]
            for p, counts in sorted(found.by_principal.items())]  # fmt: skip
    if rows:
        _print_table(["PRINCIPAL", *(s.upper() for s in statuses)], rows)
    oldest = found.oldest_unfinished
    if oldest is not None:
        print(f"oldest unfinished: {oldest.task_id} ({oldest.status.value}, "
              f"{_age(now - oldest.created_ms)}, {oldest.tool}, owner {oldest.owner})")  # fmt: skip
    print(f"{len(found.live_workers)} live worker(s); {len(found.lost_workers)} lost")
    for worker in found.lost_workers:
        silent = "left" if worker.silent_ms is None else f"silent {_age(worker.silent_ms)}"
        print(f"  lost {worker.worker_id}: {silent}, {worker.unfinished} unfinished task(s)")
    return 0


_ACTIONS = {"list": _list, "show": _show, "cancel": _cancel, "stats": _stats}


def _stats_json(found: Stats, now: int) -> dict[str, Any]:
    oldest = found.oldest_unfinished
    return {
        "total": found.total,
        "byStatus": found.by_status,
        "byPrincipal": found.by_principal,
        "oldestUnfinished": None if oldest is None else _summary(oldest, now),
        "liveWorkers": found.live_workers,
        "lostWorkers": [
            {
                "workerId": w.worker_id,
                "silentMs": w.silent_ms,
                "unfinishedTasks": w.unfinished,
            }
            for w in found.lost_workers
        ],
    }


def _summary(record: TaskRecord, now: int) -> dict[str, Any]:
    return {
        "taskId": record.task_id,
        "status": record.status.value,
        "principal": record.principal,
        "tool": record.tool,
        "owner": record.owner,
        "createdAt": _iso(record.created_ms),
        "ageMs": now - record.created_ms,
    }


def _detail(record: TaskRecord, now: int) -> dict[str, Any]:
    return {
        **_summary(record, now),
        "statusMessage": record.status_message,
        "lastUpdatedAt": _iso(record.updated_ms),
        "ttlMs": record.ttl_ms,
        "expired": record.expired(now),
        "inputRequests": dict(record.input_requests),
        "result": record.result,
        "error": record.error,
    }


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _age(ms: float) -> str:
    seconds = max(0.0, ms / 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.1f}s"


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print(
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )


def _unknown(task_id: str) -> int:
    print(f"presa-trio: no task {task_id!r} in the store", file=sys.stderr)
    return EXIT_UNKNOWN


def _fail(reason: str) -> int:
    print(f"presa-trio: {reason}", file=sys.stderr)
    return EXIT_UNUSABLE


def _duration(text: str) -> int:
    """``AGE`` in milliseconds: ``90``, ``90s``, ``5m``, ``2h``, ``1d``."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age such as 90s, 5m, 2h or 1d")
    return int(float(match[1]) * _UNIT_SECONDS[match[2]] * 1000)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("at least 1")
    return value
