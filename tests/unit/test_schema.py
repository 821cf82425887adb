"""Unit tests for presa_trio._protocol.schema: the vendored 2026-07-28 schema and its validators."""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from presa_trio._protocol.schema import (
    SCHEMA_VERSION,
    Schemas,
    Violation,
    load_document,
    load_extension_document,
)

REPO = Path(__file__).resolve().parents[2]
README = REPO / "schema" / "README.md"
SCHEMA_FILE = REPO / "presa_trio" / "schema" / SCHEMA_VERSION / "schema.json"

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Reference:
    """The pure-Python ``jsonschema`` over the same document: the reference the run-time
    engine (``jsonschema-rs``) is cross-checked against. A test tool, never the product's."""

    def __init__(self) -> None:
        self.document = load_document()

    def _validator(self, definition: str) -> Any:
        root = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": f"#/$defs/{definition}",
            "$defs": self.document["$defs"],
        }
        checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
        return jsonschema.Draft202012Validator(root, format_checker=checker)

    def is_valid(self, definition: str, instance: Any) -> bool:
        return bool(self._validator(definition).is_valid(instance))


@pytest.fixture(scope="module")
def schemas() -> Schemas:
    return Schemas()


@pytest.fixture(scope="module")
def both() -> tuple[Schemas, Reference]:
    return Schemas(), Reference()


def call(**changes: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"_meta": META, "name": "echo", "arguments": {"text": "hi"}},
    }
    for key, value in changes.items():
        if key.startswith("params_"):
            message["params"][key.removeprefix("params_")] = value
        else:
            message[key] = value
    return message


def without(message: dict[str, Any], *path: str) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(message))
    node = copy
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return copy


TEXT = {"type": "text", "text": "hi"}

# (definition, instance, valid)
CASES: list[tuple[str, Any, bool]] = [
    ("CallToolRequest", call(), True),
    ("CallToolRequest", call(id="abc"), True),
    ("CallToolRequest", without(call(), "params", "arguments"), True),
    ("CallToolRequest", call(params_requestState="opaque"), True),
    ("CallToolRequest", call(id=None), False),
    ("CallToolRequest", call(id=True), False),
    ("CallToolRequest", call(id=1.5), False),
    ("CallToolRequest", call(jsonrpc="1.0"), False),
    ("CallToolRequest", call(method="tools/list"), False),
    ("CallToolRequest", call(params_name=5), False),
    ("CallToolRequest", call(params_arguments=[]), False),
    ("CallToolRequest", without(call(), "params", "name"), False),
    ("CallToolRequest", without(call(), "params", "_meta"), False),
    ("CallToolRequest", without(call(), "id"), False),
    (
        "CallToolRequest",
        without(call(), "params", "_meta", "io.modelcontextprotocol/protocolVersion"),
        False,
    ),
    (
        "CallToolRequest",
        call(params__meta={**META, "io.modelcontextprotocol/logLevel": "loud"}),
        False,
    ),
    ("CallToolRequest", call(params__meta={**META, "progressToken": 7}), True),
    ("CallToolRequest", [call()], False),
    ("CallToolRequest", "tools/call", False),
    ("CallToolResult", {"content": [TEXT], "resultType": "complete"}, True),
    ("CallToolResult", {"content": [], "resultType": "complete", "isError": True}, True),
    (
        "CallToolResult",
        {"content": [TEXT], "structuredContent": {"a": 1}, "resultType": "complete"},
        True,
    ),
    ("CallToolResult", {"content": [TEXT]}, False),
    ("CallToolResult", {"content": TEXT, "resultType": "complete"}, False),
    ("CallToolResult", {"content": [{"type": "text"}], "resultType": "complete"}, False),
    ("CallToolResult", {"content": [TEXT], "resultType": "complete", "isError": "no"}, False),
    (
        "ListToolsResult",
        {
            "tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
            "resultType": "complete",
            "cacheScope": "private",
            "ttlMs": 0,
        },
        True,
    ),
    (
        "ListToolsResult",
        {
            "tools": [{"name": "echo", "inputSchema": {"type": "array"}}],
            "resultType": "complete",
            "cacheScope": "private",
            "ttlMs": 0,
        },
        False,
    ),
    (
        "ListToolsResult",
        {"tools": [], "resultType": "complete", "cacheScope": "shared", "ttlMs": 0},
        False,
    ),
    (
        "ListToolsResult",
        {"tools": [], "resultType": "complete", "cacheScope": "public", "ttlMs": -1},
        False,
    ),
    ("InputRequiredResult", {"resultType": "input_required", "requestState": "s"}, True),
    ("InputRequiredResult", {"requestState": "s"}, False),
    (
        "ProgressNotification",
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "t", "progress": 0.5, "total": 1},
        },
        True,
    ),
    (
        "ProgressNotification",
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t"}},
        False,
    ),
    (
        "ProgressNotification",
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": True, "progress": 1},
        },
        False,
    ),
    (
        "LoggingMessageNotification",
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "warning", "data": {"any": ["thing"]}},
        },
        True,
    ),
    (
        "LoggingMessageNotification",
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "loud", "data": 1},
        },
        False,
    ),
    (
        "ToolListChangedNotification",
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        True,
    ),
    (
        "ToolListChangedNotification",
        {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"},
        False,
    ),
]


def case_id(case: tuple[str, Any, bool]) -> str:
    return f"{case[0]}-{'valid' if case[2] else 'invalid'}"


@pytest.mark.parametrize(("definition", "instance", "valid"), CASES, ids=map(case_id, CASES))
def test_the_engine_agrees_with_the_reference(
    both: tuple[Schemas, Reference], definition: str, instance: Any, valid: bool
) -> None:
    rs, reference = both
    assert rs.is_valid(definition, instance) is valid
    assert reference.is_valid(definition, instance) is valid
    assert (rs.violations(definition, instance) == []) is valid


@pytest.mark.parametrize(
    ("instance", "pointer"),
    [
        (call(params_name=5), "/params/name"),
        (call(id=None), "/id"),
        (call(params_arguments=[]), "/params/arguments"),
    ],
)
def test_violation_pointer(schemas: Schemas, instance: Any, pointer: str) -> None:
    violations = schemas.violations("CallToolRequest", instance)
    assert [v.pointer for v in violations] == [pointer]
    assert violations[0].definition == "CallToolRequest"
    assert violations[0].message
    assert str(violations[0]).startswith(f"CallToolRequest at {pointer}: ")


def test_violation_str_at_root() -> None:
    assert str(Violation("D", "", "bad")) == "D at /: bad"


def test_violation_pointer_escapes(schemas: Schemas) -> None:
    meta = {**META, "io.modelcontextprotocol/logLevel": "loud"}
    (violation,) = schemas.violations("CallToolRequest", call(params__meta=meta))
    assert violation.pointer == "/params/_meta/io.modelcontextprotocol~1logLevel"


def test_unknown_definition(schemas: Schemas) -> None:
    with pytest.raises(KeyError):
        schemas.is_valid("NoSuchDefinition", {})


def test_one_engine_at_run_time() -> None:
    """The product validates with jsonschema-rs only; jsonschema is a test dependency."""
    import presa_trio._protocol.schema as module

    source = Path(module.__file__).read_text()
    assert "import jsonschema_rs" in source
    assert re.search(r"^\s*(import|from) jsonschema\b(?!_rs)", source, re.M) is None


def test_request_definitions(schemas: Schemas) -> None:
    assert schemas.request_definitions() == {
        "server/discover": "DiscoverRequest",
        "resources/list": "ListResourcesRequest",
        "resources/templates/list": "ListResourceTemplatesRequest",
        "resources/read": "ReadResourceRequest",
        "subscriptions/listen": "SubscriptionsListenRequest",
        "prompts/list": "ListPromptsRequest",
        "prompts/get": "GetPromptRequest",
        "tools/list": "ListToolsRequest",
        "tools/call": "CallToolRequest",
        "completion/complete": "CompleteRequest",
    }


def test_notification_definitions(schemas: Schemas) -> None:
    assert schemas.notification_definitions() == {
        "notifications/cancelled": "CancelledNotification",
        "notifications/progress": "ProgressNotification",
        "notifications/resources/list_changed": "ResourceListChangedNotification",
        "notifications/subscriptions/acknowledged": "SubscriptionsAcknowledgedNotification",
        "notifications/resources/updated": "ResourceUpdatedNotification",
        "notifications/prompts/list_changed": "PromptListChangedNotification",
        "notifications/tools/list_changed": "ToolListChangedNotification",
        "notifications/message": "LoggingMessageNotification",
    }


def test_removed_methods_are_not_core_requests(schemas: Schemas) -> None:
    methods = schemas.request_definitions()
    for removed in ("initialize", "ping", "logging/setLevel", "resources/subscribe"):
        assert removed not in methods


def test_load_document() -> None:
    document = load_document()
    assert SCHEMA_VERSION == "2026-07-28"
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert len(document["$defs"]) == 154


def recorded_sha256() -> dict[str, str]:
    """The hex digest of each version, on the README's ``sha256 (VERSION): <hex>`` lines."""
    found = re.findall(
        r"^[-*\s]*sha256 \(([0-9-]+)\):\s*`?([0-9a-f]{64})`?\s*$", README.read_text(), re.M
    )
    assert len(found) == 3, "schema/README.md must have one 'sha256 (VERSION): <hex>' per version"
    return dict(found)


def test_vendored_schema_hashes_match_readme() -> None:
    recorded = recorded_sha256()
    assert set(recorded) == {"2026-07-28", "2025-11-25", "2025-06-18"}
    for version, digest in recorded.items():
        path = REPO / "presa_trio" / "schema" / version / "schema.json"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
        packaged = resources.files("presa_trio") / "schema" / version / "schema.json"
        assert hashlib.sha256(packaged.read_bytes()).hexdigest() == digest


TASKS_SCHEMA = ("extensions", "tasks", "schema.json")


def test_the_tasks_extension_schema_hash_matches_readme() -> None:
    [digest] = re.findall(
        r"^[-*\s]*sha256 \(extension tasks\):\s*`?([0-9a-f]{64})`?\s*$", README.read_text(), re.M
    )
    path = REPO.joinpath("presa_trio", "schema", *TASKS_SCHEMA)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    packaged = resources.files("presa_trio").joinpath("schema", *TASKS_SCHEMA)
    assert hashlib.sha256(packaged.read_bytes()).hexdigest() == digest
    document = load_extension_document()
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert len(document["$defs"]) == 18
    # every reference is local or into the packaged 2026-07-28 core, and names a real $def
    core = load_document()["$defs"]
    refs = re.findall(r'"\$ref": "([^"]*)"', path.read_text())
    for ref in refs:
        where, name = ref.rsplit("/", 1)
        assert where in {"#/$defs", "urn:presa-trio:schema:2026-07-28#/$defs"}, ref
        assert name in (document["$defs"] if where == "#/$defs" else core), ref


@pytest.mark.parametrize(
    ("version", "dialect", "definitions"),
    [
        ("2025-11-25", "https://json-schema.org/draft/2020-12/schema", 145),
        ("2025-06-18", "http://json-schema.org/draft-07/schema#", 91),
    ],
)
def test_the_older_schemas_load_with_their_erratum(
    version: str, dialect: str, definitions: int
) -> None:
    document = load_document(version)
    assert document["$schema"] == dialect
    found = document.get("$defs") or document["definitions"]
    assert len(found) == definitions
    number = found["NumberSchema"]["properties"]
    assert number["minimum"]["type"] == number["maximum"]["type"] == "number"
    older = Schemas(document)
    field = {"type": "number", "default": 95.5, "minimum": 0.5}
    assert older.violations("NumberSchema", field) == []
    assert "initialize" in older.request_definitions()
    raw = json.loads((REPO / "presa_trio" / "schema" / version / "schema.json").read_text())
    raw_number = (raw.get("$defs") or raw["definitions"])["NumberSchema"]["properties"]
    assert raw_number["minimum"]["type"] == "integer"  # the file is as vendored
