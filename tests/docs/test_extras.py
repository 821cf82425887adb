"""What the documentation says each ``pip install 'presa_trio[...]'`` extra brings is what
pyproject.toml declares, and the PostgreSQL extra's psycopg brings the libpq its pipeline
mode needs (14 or later), bundled."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]


def page(path: str) -> str:
    return " ".join((ROOT / path).read_text().split())


def extra(name: str) -> set[str]:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requirements = declared["project"]["optional-dependencies"][name]
    return {re.split(r"[<>=!~ ]", requirement)[0] for requirement in requirements}


def test_each_extra_brings_what_the_readme_says() -> None:
    observability = page("docs/guides/observability.md")
    assert "`pip install 'presa_trio[otel]'` (the `opentelemetry-api` package only;" in (
        observability
    )
    assert extra("otel") == {"opentelemetry-api"}
    auth = page("docs/guides/auth.md")
    assert "pip install 'presa_trio[jwt]' (joserfc, and httpx for jwks_url)" in auth
    assert extra("jwt") == {"joserfc", "httpx"}
    assert "`pip install 'presa_trio[introspection]'`, which brings httpx" in auth
    assert extra("introspection") == {"httpx"}
    deploying = page("docs/guides/deploying.md")
    claim = "pip install 'presa_trio[postgres]' # psycopg 3 and psycopg-pool, libpq bundled"
    assert claim in deploying
    assert extra("postgres") == {"psycopg[binary]", "psycopg-pool"}  # binary: libpq bundled
    readme = page("README.md")  # the README's list of extras says the same
    assert "`otel`: OpenTelemetry spans (`opentelemetry-api` only" in readme
    assert "`jwt`: `JwtVerifier` (joserfc, and httpx for `jwks_url`)" in readme
    assert "`introspection`: `IntrospectionVerifier` (httpx)" in readme
    postgres = "`postgres`: the PostgreSQL backend (psycopg 3 and psycopg-pool, libpq bundled)"
    assert postgres in readme
    docs = page("mkdocs.yml")  # the docs extra builds the site mkdocs.yml configures
    assert extra("docs") == {"mkdocs", "mkdocs-material", "mkdocstrings[python]"}
    assert "name: material" in docs and "- mkdocstrings:" in docs
    assert "`docs`: what builds this documentation (mkdocs, mkdocs-material, mkdocstrings)" in (
        readme
    )


def test_the_postgres_extra_brings_a_libpq_with_pipeline_mode() -> None:
    text = page("docs/guides/deploying.md")
    claim = "Pipeline mode needs libpq 14 or later, which `psycopg[binary]` (the `postgres` extra)"
    assert claim in text
    assert psycopg.pq.__impl__ == "binary"  # what psycopg[binary] installs: its own libpq
    assert psycopg.pq.version() >= 140000
    assert psycopg.Pipeline.is_supported()
