"""Learning that a file in a directory was written, without looking: Linux's inotify, called
through ``ctypes`` (no dependency); elsewhere there is no watch and the caller polls.

The SQLite backend watches its database's directory: every commit writes the write-ahead
log there, so a worker that expects signals from the others wakes when one commits rather
than at its next poll, and reads nothing while nothing is written. ``presa-trio dev`` watches
a module's folders for saves (``IN_SAVED``) the same way.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import final

import trio

IN_MODIFY = 0x00000002  # <sys/inotify.h>: a file in the watched directory was written
#: ... or saved anew: closed after writing, moved in or out, created, deleted (an editor
#: that saves by writing a new file and renaming it over the old one is seen too).
IN_SAVED = 0x00000008 | 0x00000040 | 0x00000080 | 0x00000100 | 0x00000200


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    return libc if hasattr(libc, "inotify_init1") else None


@final
class DirectoryWatch:
    """An inotify instance watching one directory for writes to the files in it."""

    __slots__ = ("_fd", "_libc", "_mask")

    def __init__(self, fd: int, libc: ctypes.CDLL, mask: int) -> None:
        self._fd = fd
        self._libc = libc
        self._mask = mask

    @classmethod
    def open(cls, directory: str, mask: int = IN_MODIFY) -> DirectoryWatch | None:
        """A watch on ``directory`` for the events of ``mask`` (writes by default), or None
        where none can be had: not Linux, or the user's inotify instances are used up
        (``fs.inotify.max_user_instances``, 128 by default), or the directory cannot be
        watched."""
        libc = _libc()
        if libc is None:
            return None
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return None
        watch = cls(fd, libc, mask)
        if not watch.add(directory):
            os.close(fd)
            return None
        return watch

    def add(self, directory: str) -> bool:
        """Watch ``directory`` too (one already watched: nothing); whether it is watched."""
        return bool(self._libc.inotify_add_watch(self._fd, os.fsencode(directory), self._mask) >= 0)

    async def written(self) -> None:
        """Return once a file in the directory has been written since the last return (at
        once if one has been); what was reported until now is consumed."""
        if self._consume():
            await trio.lowlevel.checkpoint()
            return
        while True:
            await trio.lowlevel.wait_readable(self._fd)
            if self._consume():
                return

    def _consume(self) -> bool:
        """Read every event reported so far (the fd never blocks); whether there was one."""
        reported = False
        while True:
            try:
                if not os.read(self._fd, 4096):
                    return reported
            except BlockingIOError:
                return reported
            reported = True

    def close(self) -> None:
        """Close the watch (again: nothing); a task waiting in ``written`` gets
        ``trio.ClosedResourceError``."""
        if self._fd < 0:
            return
        if trio.lowlevel.in_trio_run():
            trio.lowlevel.notify_closing(self._fd)
        os.close(self._fd)
        self._fd = -1
