"""A server whose tools return each kind of hinted value, for the published clients' typed
results (tests/handlers/test_structured_clients.py): ``hypercorn structured_app:app``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from pydantic import BaseModel

from presa_trio import Server


class Totals(TypedDict):
    count: int
    names: list[str]


@dataclass
class Point:
    x: float
    y: float


class Reading(BaseModel):
    sensor: str
    value: float


server = Server("structured", "1.0.0")


@server.tool(thread=False)
def counts() -> dict[str, int]:
    """Words and how often they occur."""
    return {"tea": 2, "cake": 1}


@server.tool(thread=False)
def greeting(name: str) -> str:
    """A greeting."""
    return f"Hello, {name}"


@server.tool(thread=False)
def double(n: int) -> int:
    return n * 2


@server.tool(thread=False)
def totals() -> Totals:
    return {"count": 2, "names": ["a", "b"]}


@server.tool(thread=False)
def points() -> list[Point]:
    return [Point(1.0, 2.0), Point(3.0, 4.5)]


@server.tool(thread=False)
def reading() -> Reading:
    return Reading(sensor="north", value=21.5)


@server.tool(thread=False)
def maybe(found: bool) -> Point | None:
    return Point(0.5, 0.25) if found else None


@server.tool(thread=False)
def nothing() -> None:
    return None


app = server.asgi_app()
