"""The Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) for presa_trio.

``server.add_extension(TasksExtension())`` turns long tool calls into tasks: each runs in its
own nursery with its own cancel scope, parks on input through memory channels, and is read,
updated and cancelled with ``tasks/get``, ``tasks/update`` and ``tasks/cancel``. A store of
your own implements ``TaskStore`` (and ``LeaseStore``, for the tasks of lost workers to be
failed on a shared backend, and ``ListingStore``, for the 2025-11-25 ``tasks/list``) and
proves it with ``testing.check_task_store`` and ``testing.check_lease_store``;
``TasksExtension(store_factory=...)`` chooses it per run. On 2025-11-25 sessions the same
tasks are served as that revision's experimental tasks.

``Limits`` is the deprecated name of ``TaskLimits``.
"""

import warnings
from typing import Any

from ._extension import POLICIES as POLICIES
from ._extension import TasksExtension as TasksExtension
from ._extension import default_store as default_store
from ._states import Status as Status
from ._states import TaskRecord as TaskRecord
from ._store import LeaseStore as LeaseStore
from ._store import ListingStore as ListingStore
from ._store import MemoryTaskStore as MemoryTaskStore
from ._store import TaskLimits as TaskLimits
from ._store import TaskStore as TaskStore
from ._wire import EXTENSION_ID as EXTENSION_ID

__all__ = [
    "EXTENSION_ID",
    "POLICIES",
    "LeaseStore",
    "ListingStore",
    "MemoryTaskStore",
    "Status",
    "TaskLimits",
    "TaskRecord",
    "TaskStore",
    "TasksExtension",
    "default_store",
]


def __getattr__(name: str) -> Any:
    if name == "Limits":  # renamed: presa_trio.Limits is the server's
        warnings.warn(
            "presa_trio.ext.tasks.Limits is deprecated; use presa_trio.ext.tasks.TaskLimits",
            DeprecationWarning,
            stacklevel=2,
        )
        return TaskLimits
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
