"""The capture checker behind ``presa-trio validate`` and the content builders, in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from presa_trio import content
from presa_trio._cli import main
from presa_trio._protocol.capture import CaptureChecker

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def lines(*messages: object) -> list[str]:
    return [m if isinstance(m, str) else json.dumps(m) for m in messages]


def test_results_are_typed_by_the_request_they_answer() -> None:
    capture = lines(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}},
        {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "tools": []}},
    )
    findings = list(CaptureChecker().check(capture))
    assert [(f.line, f.definition, f.pointer) for f in findings] == [
        (2, "ListToolsResult", "/result"),
        (2, "ListToolsResult", "/result"),
    ]
    assert {f.message for f in findings} == {
        '"ttlMs" is a required property',
        '"cacheScope" is a required property',
    }


def test_input_required_and_unknown_results() -> None:
    capture = lines(
        {
            "jsonrpc": "2.0",
            "id": "a",
            "method": "tools/call",
            "params": {"name": "t", "_meta": META},
        },
        {
            "jsonrpc": "2.0",
            "id": "a",
            "result": {"resultType": "input_required", "requestState": "s"},
        },
        {"jsonrpc": "2.0", "id": "z", "result": {"resultType": "task", "taskId": "x"}},
    )
    # a task result that answers no request, in a capture where no one declared the Tasks
    # extension: two findings (this line used to pass unchecked)
    found = [(f.line, f.rule, f.pointer) for f in CaptureChecker().check(capture)]
    assert found == [(3, "orphan-response", "/id"), (3, "result-type", "/result/resultType")]


def test_tagged_client_notification_and_inferred_sides() -> None:
    capture = lines(
        {
            "direction": "client",
            "message": {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 1},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "loud", "data": 1},
        },
        {"nothing": True},
    )
    found = [(f.line, f.definition) for f in CaptureChecker().check(capture)]
    assert found[0] == (3, "LoggingMessageNotification")
    assert (4, "JSONRPCMessage") in found


def test_cli_validate_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(
        json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
        )
        + "\n"
    )
    assert main(["validate", str(good)]) == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}\n')
    assert main(["validate", str(bad)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{bad}:1: JSONRPCErrorResponse at /id:")
    assert main(["validate", str(tmp_path / "missing")]) == 2


def test_cli_rejects_malformed_targets() -> None:
    with pytest.raises(SystemExit, match="expected MODULE:SERVER"):
        main(["serve", "no-colon", "--stdio"])


def test_content_builders() -> None:
    assert content.text("hi") == {"type": "text", "text": "hi"}
    assert content.image(b"\x00\x01", "image/png") == {
        "type": "image",
        "data": "AAE=",
        "mimeType": "image/png",
    }
    assert content.audio("AAE=", "audio/wav")["data"] == "AAE="
    assert content.text_contents("x://a", "t") == {"uri": "x://a", "text": "t"}
    assert content.blob_contents("x://b", b"\xff", "application/octet-stream") == {
        "uri": "x://b",
        "blob": "/w==",
        "mimeType": "application/octet-stream",
    }
    assert content.embedded(content.text_contents("x://a", "t", "text/plain")) == {
        "type": "resource",
        "resource": {"uri": "x://a", "text": "t", "mimeType": "text/plain"},
    }
    assert content.resource_link("x://a", "a", mimeType="text/plain") == {
        "type": "resource_link",
        "uri": "x://a",
        "name": "a",
        "mimeType": "text/plain",
    }
