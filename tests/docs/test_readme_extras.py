"""What the README says each ``pip install 'presa_trio[...]'`` extra brings is what
pyproject.toml declares, and the PostgreSQL extra's psycopg brings the libpq its pipeline
mode needs (14 or later), bundled."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]


def readme() -> str:
    return " ".join((ROOT / "README.md").read_text().split())


def extra(name: str) -> set[str]:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requirements = declared["project"]["optional-dependencies"][name]
    return {re.split(r"[<>=!~ ]", requirement)[0] for requirement in requirements}


def test_each_extra_brings_what_the_readme_says() -> None:
    text = readme()
    assert "`pip install 'presa_trio[otel]'` (the `opentelemetry-api` package only;" in text
    assert extra("otel") == {"opentelemetry-api"}
    assert "pip install 'presa_trio[jwt]' (joserfc, and httpx for jwks_url)" in text
    assert extra("jwt") == {"joserfc", "httpx"}
    assert "pip install 'presa_trio[postgres]' # psycopg 3 and psycopg-pool, libpq bundled" in text
    assert extra("postgres") == {"psycopg[binary]", "psycopg-pool"}  # binary: libpq bundled


def test_the_postgres_extra_brings_a_libpq_with_pipeline_mode() -> None:
    text = readme()
    claim = "Pipeline mode needs libpq 14 or later, which `psycopg[binary]` (the `postgres` extra)"
    assert claim in text
    assert psycopg.pq.__impl__ == "binary"  # what psycopg[binary] installs: its own libpq
    assert psycopg.pq.version() >= 140000
    assert psycopg.Pipeline.is_supported()
