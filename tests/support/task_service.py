"""The Tasks extension as a test sees it: the capabilities a client declares to use it, the tasks
service of the run a client talks to, and the principal a test's clients are told apart by."""

from __future__ import annotations

from typing import Any

from presa_trio import Context
from presa_trio.ext.tasks import EXTENSION_ID
from presa_trio.testing import Client

TASKS: dict[str, Any] = {"extensions": {EXTENSION_ID: {}}}
WITH_TASKS: dict[str, Any] = {"elicitation": {}, **TASKS}


def tasks_of(client: Client) -> Any:
    """The tasks service of the run ``client`` talks to (its store and runner)."""
    runtime = client.app.runtime
    assert runtime is not None
    return runtime.service(EXTENSION_ID)


def client_name(ctx: Context) -> str:
    """The principal: the clientInfo name of the request."""
    info = ctx.meta.client_info or {}
    return str(info.get("name", ""))
