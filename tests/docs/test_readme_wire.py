"""The wire reference's curl block (docs/reference/wire.md, "Every mode with curl"), run as it is
(bash and curl) against the fixture under a real hypercorn worker on 127.0.0.1: every mode
answers as the page says."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from support.servers import ROOT, running

pytestmark = pytest.mark.e2e

WIRE = ROOT / "docs" / "reference" / "wire.md"


def block() -> str:
    text = WIRE.read_text()
    found = re.search(r"<!-- on-the-wire -->\n```bash\n(.*?)```\n<!-- /on-the-wire -->", text, re.S)
    assert found is not None, "docs/reference/wire.md lost its on-the-wire block"
    return found.group(1)


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_readme_wire_examples_answer_as_described(tmp_path: object) -> None:
    script = block()
    assert "http://127.0.0.1:3000/mcp" in script
    with running("fixtures.conformance:app") as served:
        script = script.replace("127.0.0.1:3000", f"127.0.0.1:{served.port}")
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    results = [a["result"] for a in answers]
    assert results[0]["content"] == [
        {"type": "text", "text": "This is a simple text response for testing."}
    ]
    assert results[1]["resultType"] == "input_required"
    assert results[2]["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    assert [r["status"] for r in results[3:4]] == ["working"]
    assert results[5]["status"] == "cancelled"
    assert results[6]["status"] == "input_required"
    assert results[8]["status"] == "completed"
    assert results[8]["result"]["content"] == [{"type": "text", "text": "Delete confirmed: true"}]
    events = [line for line in done.stdout.splitlines() if line.startswith("data: ")]
    assert json.loads(events[0][6:])["method"] == "notifications/subscriptions/acknowledged"
