"""The Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) for presa_trio.

``server.add_extension(TasksExtension())`` turns long tool calls into tasks: each runs in its
own nursery with its own cancel scope, parks on input through memory channels, and is read,
updated and cancelled with ``tasks/get``, ``tasks/update`` and ``tasks/cancel``. A store of
your own implements ``TaskStore`` and proves it with ``testing.check_task_store``.
"""

from ._extension import POLICIES as POLICIES
from ._extension import TasksExtension as TasksExtension
from ._states import Status as Status
from ._states import TaskRecord as TaskRecord
from ._store import Limits as Limits
from ._store import MemoryTaskStore as MemoryTaskStore
from ._store import TaskStore as TaskStore
from ._wire import EXTENSION_ID as EXTENSION_ID

__all__ = [
    "EXTENSION_ID",
    "POLICIES",
    "Limits",
    "MemoryTaskStore",
    "Status",
    "TaskRecord",
    "TaskStore",
    "TasksExtension",
]
