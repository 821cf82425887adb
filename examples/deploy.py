"""A deploy tool, ported from an SDK server: it runs as a task, asks for confirmation before
it touches anything, reports its steps, and sits behind bearer auth with a ``deploy`` scope.

Configure it from the environment: ``DEPLOY_ISSUER`` (the authorization server),
``DEPLOY_RESOURCE`` (this endpoint as clients reach it, the tokens' audience) and
``DEPLOY_JWKS`` (a file holding the issuer's public JWK set; leave it unset to fetch
``{DEPLOY_ISSUER}/.well-known/jwks.json``). Serve it with
``hypercorn --worker-class trio examples.deploy:app``.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass

import trio

from presa_trio import Context, Server
from presa_trio.auth import BearerAuth, JwtVerifier
from presa_trio.ext.tasks import TasksExtension
from presa_trio.mrtr import elicit

STEPS = ("build", "push", "migrate", "switch traffic")


class Environment(enum.Enum):
    staging = "staging"
    production = "production"


@dataclass
class Deployment:
    service: str
    version: str
    environment: Environment
    outcome: str  # "deployed" or "declined"
    by: str
    steps: list[str]


def bearer_auth() -> BearerAuth:
    issuer = os.environ.get("DEPLOY_ISSUER", "https://auth.example.com")
    resource = os.environ.get("DEPLOY_RESOURCE", "http://127.0.0.1:8000/mcp")
    keys_file = os.environ.get("DEPLOY_JWKS")
    if keys_file:
        with open(keys_file) as keys:
            verifier = JwtVerifier(jwks=json.load(keys), issuer=issuer)
    else:
        verifier = JwtVerifier(jwks_url=f"{issuer}/.well-known/jwks.json", issuer=issuer)
    return BearerAuth(
        verifier,
        resource=resource,
        authorization_servers=[issuer],
        scopes_supported=["deploy", "status"],
    )


server = Server("deployer", version="1.0.0", auth=bearer_auth())
server.add_extension(TasksExtension(ttl_ms=3_600_000, poll_interval_ms=500))


@server.tool(scopes=["deploy"], options={"tasks": "required"})
async def deploy(
    ctx: Context, service: str, version: str, environment: Environment = Environment.staging
) -> Deployment:
    """Deploys one version of a service, after the user confirms."""
    question = elicit(
        f"Deploy {service} {version} to {environment.value}?",
        {"confirm": {"type": "boolean", "title": "Go ahead"}},
        ["confirm"],
    )
    answer = (await ctx.input({"confirm": question}))["confirm"]
    confirmed = answer.get("action") == "accept" and answer.get("content", {}).get("confirm")
    if not confirmed:
        return Deployment(service, version, environment, "declined", ctx.principal, [])
    done: list[str] = []
    for step in STEPS:
        await trio.sleep(0.01)  # the real work: a build, a push, a migration
        done.append(step)
    return Deployment(service, version, environment, "deployed", ctx.principal, done)


@server.tool(scopes=["status"])
async def status(service: str) -> str:
    """Which version of a service runs where (any token with the status scope)."""
    return f"{service}: staging 1.4.2, production 1.4.1"


app = server.asgi_app()
