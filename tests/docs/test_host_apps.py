"""The two host apps of the mounting guide, docs/guides/mounting.md (Starlette with
``lifespan=mcp_app.host_lifespan``, Quart-Trio with ``mcp_app.mounted``), each served by real
hypercorn: MCP under ``/deploy``, the host's own route beside it, and a clean stop with the
server drained after the host."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from support.live_http import mcp_request
from support.servers import ROOT, running

pytestmark = pytest.mark.e2e


def readme_example(name: str) -> str:
    text = (ROOT / "docs" / "guides" / "mounting.md").read_text()
    found = re.search(rf"```python\n# host example: {name}\n(.*?)```", text, re.DOTALL)
    assert found is not None, f"the mounting guide lost its {name} example"
    return found.group(1)


@pytest.mark.parametrize("name", ["starlette-host", "quart-trio-host"])
def test_the_readme_host_apps_serve_mcp_under_their_prefix(name: str, tmp_path: Path) -> None:
    source = readme_example(name)
    if name == "quart-trio-host":  # its hooks say whether the server runs around the host
        source += (
            "\n\n@app.before_serving\nasync def up() -> None:\n"
            "    print('host startup; mcp running:', mcp_app.runtime is not None, flush=True)\n"
            "\n\n@app.after_serving\nasync def down() -> None:\n"
            "    print('host shutdown; mcp running:', mcp_app.runtime is not None, flush=True)\n"
        )
    (tmp_path / "host_app.py").write_text(source)
    with running("host_app:app", tmp_path, tmp_path / "server.log") as served:
        base = f"http://127.0.0.1:{served.port}"
        body, headers = mcp_request("tools/call", {"name": "hello", "arguments": {"name": "q"}})
        answer = httpx.post(f"{base}/deploy/mcp", content=body, headers=dict(headers))
        assert answer.status_code == 200, answer.text
        assert json.loads(answer.text)["result"]["content"] == [{"type": "text", "text": "hello q"}]
        home = httpx.get(f"{base}/")
        assert (home.status_code, home.text) == (200, "the host app")
        assert httpx.post(f"{base}/mcp", content=body, headers=dict(headers)).status_code == 404
        assert served.stop() == 0
    log = served.log()
    assert "Traceback" not in log
    if name == "quart-trio-host":
        assert "host startup; mcp running: True" in log
        assert "host shutdown; mcp running: True" in log
