"""``presa-trio list``, ``call`` and ``read`` end to end, each against the same server three
ways: in process (``MODULE:SERVER``), under a real hypercorn trio worker on 127.0.0.1 (a URL)
and as a spawned stdio process (``--stdio -- CMD``). The command runs as a subprocess, as a
user runs it; its questions are answered with ``--answer`` or on its stdin."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from support.cli_runner import presa, serve_stdio
from support.servers import SUPPORT, running

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Target:
    """How a command names the server: a URL or MODULE:SERVER, or a command to spawn."""

    name: str | None = None
    spawn: tuple[str, ...] = ()

    def run(
        self, command: str, *rest: str, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        if self.spawn:
            return presa(command, "--stdio", *rest, "--", *self.spawn, stdin=stdin)
        assert self.name is not None
        return presa(command, self.name, *rest, stdin=stdin)


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    with running("cli_client_app:app", SUPPORT) as served:
        yield served.port


@pytest.fixture(params=["in-process", "http", "stdio"])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "in-process":
        return Target("cli_client_app:server")
    if request.param == "http":
        port = request.getfixturevalue("http_port")
        return Target(f"http://127.0.0.1:{port}/mcp")
    return Target(spawn=tuple(serve_stdio()))


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The command's failure, which must be exactly one ``presa-trio:`` line on stderr."""
    lines = [line for line in done.stderr.splitlines() if line.startswith("presa-trio: ")]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_list_prints_each_tool_with_its_arguments_and_first_description_line(
    target: Target,
) -> None:
    done = target.run("list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["add(a: integer, b: integer)", "    Add two integers."]
    assert 'ask_task(greeting: string = "Hello")' in lines
    assert (
        "describe(count: integer, ratio: number, loud: boolean, tags: array, extra: object, "
        'label: string = "none", missing: null|integer = null)'
    ) in lines


def test_list_json_prints_the_raw_tools(target: Target) -> None:
    done = target.run("list", "--json")
    assert done.returncode == 0, done.stderr
    tools = json.loads(done.stdout)
    assert [tool["name"] for tool in tools] == [
        "add", "ask", "ask_task", "count_up", "describe", "fail", "region_weather", "slow_task",
    ]  # fmt: skip
    assert tools[0]["inputSchema"]["required"] == ["a", "b"]


def test_list_resources_and_prompts(target: Target) -> None:
    resources = target.run("list", "--resources")
    assert resources.returncode == 0, resources.stderr
    assert resources.stdout == "notes://greeting (text/plain)  greeting\n    A fixed note.\n"
    prompts = target.run("list", "--prompts", "--json")
    assert prompts.returncode == 0, prompts.stderr
    assert [
        (p["name"], [a["name"] for a in p["arguments"]]) for p in json.loads(prompts.stdout)
    ] == [("summarize", ["topic", "words"])]


def test_call_prints_the_text_content(target: Target) -> None:
    done = target.run("call", "add", "a=2", "b=40")
    assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr


def test_call_reports_progress_on_stderr(target: Target) -> None:
    done = target.run("call", "count_up", "to=3")
    assert (done.returncode, done.stdout) == (0, "counted to 3\n"), done.stderr
    reported = [line for line in done.stderr.splitlines() if line.startswith("progress")]
    assert reported == ["progress 1/3: step 1", "progress 2/3: step 2", "progress 3/3: step 3"]


def test_call_types_each_value_by_the_input_schema(target: Target) -> None:
    done = target.run(
        "call", "describe", "count=3", "ratio=2.5", "loud=true", 'tags=["x", "y"]',
        'extra={"k": [1]}', "missing=null", "label=007", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "count": 3,
        "ratio": 2.5,
        "loud": True,
        "tags": ["x", "y"],
        "extra": {"k": [1]},
        "label": "007",  # a string stays as typed, though it reads as a number
        "missing": None,
    }


def test_call_merges_args_json_under_key_values(target: Target) -> None:
    given = {"count": 1, "ratio": 1, "loud": False, "tags": [], "extra": {}, "label": "json"}
    done = target.run("call", "describe", "--args", json.dumps(given), "count=9", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {**given, "count": 9, "missing": None}


def test_call_of_a_tool_error_prints_it_and_exits_1(target: Target) -> None:
    done = target.run("call", "fail")
    assert done.returncode == 1, done.stderr
    assert "it failed on purpose" in done.stdout


def test_call_mirrors_a_header_argument_the_server_requires(target: Target) -> None:
    """``region`` is also sent as ``Mcp-Param-Region`` (Base64 for a non-ASCII value): over
    HTTP the server refuses the call without it (-32020)."""
    done = target.run("call", "region_weather", "region=Zürich")
    assert (done.returncode, done.stdout) == (0, "weather in Zürich\n"), done.stderr


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (["add", "a=1", "c=2"], "the tool takes no argument 'c' (it takes: a, b)"),
        (["add", "a=one", "b=2"], "a='one': expected integer"),
        (["add", "a"], "expected KEY=VALUE, got 'a'"),
        (["add", "--args", "[1]"], "--args must be a JSON object"),
        (["nope"], "the server has no tool 'nope'"),
    ],
)
def test_call_with_bad_arguments_exits_2_with_one_line(
    target: Target, arguments: list[str], reason: str
) -> None:
    done = target.run("call", *arguments)
    assert done.returncode == 2
    assert one_error_line(done).startswith(f"presa-trio: {reason}")
    assert done.stdout == ""


def test_call_answers_an_mrtr_question_from_answer(target: Target) -> None:
    done = target.run("call", "ask", "--answer", 'name={"name": "Ada"}')
    assert (done.returncode, done.stdout) == (0, "Hello, Ada\n"), done.stderr


def test_call_answers_an_mrtr_question_from_stdin(target: Target) -> None:
    done = target.run("call", "ask", stdin='{"action": "decline"}\n')
    assert (done.returncode, done.stdout) == (0, "no name (decline)\n"), done.stderr
    assert "the server asks (name): Your name?" in done.stderr


def test_an_answer_on_stdin_that_is_not_json_exits_2(target: Target) -> None:
    done = target.run("call", "ask", stdin="Ada\n")
    assert done.returncode == 2
    assert one_error_line(done) == "presa-trio: the answer on stdin is not JSON: 'Ada'"


def test_call_follows_a_task_with_a_question_answered_on_stdin(target: Target) -> None:
    done = target.run("call", "ask_task", "greeting=Hi", stdin='{"name": "Ada"}\n')
    assert (done.returncode, done.stdout) == (0, "Hi, Ada\n"), done.stderr
    statuses = [
        line.split()[2].rstrip(":") for line in done.stderr.splitlines() if line.startswith("task ")
    ]
    assert statuses[0] == "working"
    assert "input_required" in statuses
    assert statuses[-1] == "completed"
    assert "the server asks (name): Your name?" in done.stderr


def test_call_of_a_task_past_its_timeout_exits_3_naming_the_task(target: Target) -> None:
    done = target.run("call", "slow_task", "--timeout", "2")
    assert done.returncode == 3
    line = one_error_line(done)
    assert line.startswith("presa-trio: no answer within --timeout 2 seconds (task ")


def test_read_prints_the_text_and_json_prints_the_result(target: Target) -> None:
    done = target.run("read", "notes://greeting")
    assert (done.returncode, done.stdout) == (0, "hello, reader\n"), done.stderr
    raw = target.run("read", "notes://greeting", "--json")
    assert json.loads(raw.stdout)["contents"] == [
        {"uri": "notes://greeting", "mimeType": "text/plain", "text": "hello, reader"}
    ]


def test_read_of_an_unknown_resource_exits_3_with_the_servers_error(target: Target) -> None:
    done = target.run("read", "notes://nope")
    assert done.returncode == 3
    assert one_error_line(done).startswith("presa-trio: the server answered error -32602")
