"""Authorization for MCP over HTTP (spec 2026-07-28 basic/authorization): the server as an
OAuth 2.1 resource server.

``Server(auth=BearerAuth(verifier, resource=..., authorization_servers=[...]))`` makes the
HTTP app require a bearer token on every request (401 with a ``WWW-Authenticate`` challenge
without one), serve its Protected Resource Metadata under ``/.well-known/
oauth-protected-resource`` (mounted under a prefix, the host serves it at its root with
``AsgiApp.metadata_app()``), and check the scopes a tool declares (``@server.tool(scopes=
[...])``, 403 ``insufficient_scope``). A handler sees the verified token as
``ctx.access_token``, and its subject is the default principal. stdio is not affected: its
credentials come from the environment. ``JwtVerifier`` (needs joserfc) verifies JWTs;
``IntrospectionVerifier`` (needs httpx) asks the authorization server (RFC 7662).
"""

from .._protocol.tokens import AccessToken as AccessToken
from .._protocol.tokens import TokenVerifier as TokenVerifier
from ._bearer import BearerAuth as BearerAuth
from ._introspection import IntrospectionVerifier as IntrospectionVerifier
from ._jwt import JwtVerifier as JwtVerifier

__all__ = ["AccessToken", "BearerAuth", "IntrospectionVerifier", "JwtVerifier", "TokenVerifier"]
