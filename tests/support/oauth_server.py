"""A small OAuth 2.1 authorization server for the end-to-end discovery tests, served by
hypercorn on 127.0.0.1 (its port in ``PRESA_AS_PORT``).

It does what an MCP client needs of one and no more: RFC 8414 metadata, dynamic client
registration (RFC 7591), the authorization code grant with PKCE (S256 only) whose user
consents at once, and JWT access tokens for the ``resource`` the client names (RFC 8707),
signed with a key made at start and published at ``/.well-known/jwks.json``. Each request
it answers is printed as one line, ``AS {json}``, for the test to read.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import time
from typing import Any
from urllib.parse import urlencode

from joserfc import jwk, jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

ISSUER = f"http://127.0.0.1:{os.environ['PRESA_AS_PORT']}"
KEY = jwk.ECKey.generate_key("P-256", auto_kid=True)
clients: dict[str, dict[str, Any]] = {}
codes: dict[str, dict[str, Any]] = {}


def log(request: Request, status: int, **seen: Any) -> None:
    line = {"method": request.method, "path": request.url.path, "status": status, **seen}
    print("AS", json.dumps(line), flush=True)


def refuse(request: Request, why: str) -> JSONResponse:
    log(request, 400, error=why)
    return JSONResponse({"error": "invalid_request", "error_description": why}, 400)


async def metadata(request: Request) -> JSONResponse:
    log(request, 200)
    return JSONResponse(
        {
            "issuer": ISSUER,
            "authorization_endpoint": f"{ISSUER}/authorize",
            "token_endpoint": f"{ISSUER}/token",
            "registration_endpoint": f"{ISSUER}/register",
            "jwks_uri": f"{ISSUER}/.well-known/jwks.json",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "authorization_response_iss_parameter_supported": True,
        }
    )


async def keys(request: Request) -> Response:
    log(request, 200)
    body = json.dumps(jwk.KeySet([KEY]).as_dict(private=False))
    return Response(body, media_type="application/json")


async def register(request: Request) -> JSONResponse:
    asked = await request.json()
    if not isinstance(asked, dict) or not asked.get("redirect_uris"):
        return refuse(request, "redirect_uris are required")
    client_id = secrets.token_urlsafe(12)
    clients[client_id] = asked
    log(request, 201)
    registered = {**asked, "client_id": client_id, "token_endpoint_auth_method": "none"}
    return JSONResponse({**registered, "client_id_issued_at": int(time.time())}, 201)


async def authorize(request: Request) -> Response:
    """The user consents at once: straight back to the client with a code."""
    asked = request.query_params
    client = clients.get(asked.get("client_id", ""))
    if client is None or asked.get("redirect_uri") not in client["redirect_uris"]:
        return refuse(request, "unknown client or redirect_uri")
    if asked.get("response_type") != "code" or asked.get("code_challenge_method") != "S256":
        return refuse(request, "only the code flow with S256 PKCE")
    code = secrets.token_urlsafe(16)
    codes[code] = {
        "client_id": asked["client_id"],
        "redirect_uri": asked["redirect_uri"],
        "challenge": asked.get("code_challenge", ""),
        "resource": asked.get("resource"),
        "scope": asked.get("scope", ""),
    }
    log(request, 302, resource=asked.get("resource"), scope=asked.get("scope"))
    back = {"code": code, "state": asked.get("state", ""), "iss": ISSUER}
    return RedirectResponse(f"{asked['redirect_uri']}?{urlencode(back)}", 302)


async def token(request: Request) -> JSONResponse:
    form = await request.form()
    grant = codes.pop(str(form.get("code", "")), None)
    if grant is None or form.get("grant_type") != "authorization_code":
        return refuse(request, "unknown code")
    verifier = str(form.get("code_verifier", "")).encode()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
    if challenge.decode() != grant["challenge"]:
        return refuse(request, "PKCE verification failed")
    if (form.get("client_id"), form.get("redirect_uri")) != (
        grant["client_id"],
        grant["redirect_uri"],
    ):
        return refuse(request, "client_id or redirect_uri differ from the authorization")
    if form.get("resource") != grant["resource"] or not grant["resource"]:
        return refuse(request, "the resource differs from the authorization")
    claims = {
        "iss": ISSUER,
        "sub": "ada",  # the user who consented
        "client_id": grant["client_id"],
        "aud": grant["resource"],
        "scope": grant["scope"],
        "exp": int(time.time()) + 300,
    }
    access = jwt.encode({"alg": "ES256", "kid": KEY.kid}, claims, KEY, algorithms=["ES256"])
    log(request, 200, resource=grant["resource"])
    answer = {"access_token": access, "token_type": "Bearer", "expires_in": 300}
    return JSONResponse({**answer, "scope": grant["scope"]})


app = Starlette(
    routes=[
        Route("/.well-known/oauth-authorization-server", metadata),
        Route("/.well-known/jwks.json", keys),
        Route("/register", register, methods=["POST"]),
        Route("/authorize", authorize),
        Route("/token", token, methods=["POST"]),
    ]
)
