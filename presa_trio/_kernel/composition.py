"""Composition: what a server mounted under a prefix serves as, in its parent's registry
(``Server.mount``).

Tools and prompts are named ``{prefix}_{name}``; a resource's URI, and a template's, take the
prefix as the first segment after ``scheme://``; completers follow the prompt or URI they
complete. Each handler keeps its ``Signature``, marked with the server it came from so that
its ``ctx.lifespan`` is that server's. Pure renaming: the checks a mount makes of the servers
themselves, and running them, are ``Server``'s.
"""

from __future__ import annotations

import re
from dataclasses import replace

from .registry import Registry
from .signature import Signature

PREFIX = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def check_prefix(prefix: object) -> str:
    """``prefix`` if it can prefix names and URIs alike, else ``ValueError``."""
    if not isinstance(prefix, str) or not PREFIX.match(prefix):
        raise ValueError(
            f"mount prefix {prefix!r} must be 1-64 characters of [A-Za-z0-9_.-]: it goes into "
            "tool names and resource URIs"
        )
    return prefix


def prefixed_name(prefix: str, name: str) -> str:
    """A mounted tool's or prompt's name: ``weather`` and ``forecast`` give
    ``weather_forecast``."""
    return f"{prefix}_{name}"


def prefixed_uri(prefix: str, uri: str) -> str:
    """A mounted resource's URI, or template's: the prefix becomes the first segment after
    ``scheme://`` (``weather`` and ``data://stations/{id}`` give
    ``data://weather/stations/{id}``). A URI of another form cannot take a prefix:
    ``ValueError``."""
    scheme, separator, rest = uri.partition("://")
    if not separator or not scheme or "{" in scheme:
        raise ValueError(
            f"resource {uri!r} cannot be mounted under prefix {prefix!r}: only a URI of the "
            "form scheme://rest takes a prefix"
        )
    return f"{scheme}://{prefix}/{rest}"


def _from(signature: Signature, server: object) -> Signature:
    """``signature``, marked as a handler of ``server`` (kept when it already is: a server
    mounted in a mounted server keeps its own lifespan)."""
    if signature.mounted_from is not None:
        return signature
    return replace(signature, mounted_from=server)


def prefixed(registry: Registry, prefix: str, server: object) -> Registry:
    """A new registry holding what ``registry`` (of ``server``) serves, renamed for
    ``prefix``; ``ValueError`` when an entry cannot be (a URI without ``scheme://``, a tool
    name that grows past 128 characters)."""
    found = Registry()
    for tool in registry.tools.values():
        name = prefixed_name(prefix, tool.name)
        found.add_tool(replace(tool, name=name, signature=_from(tool.signature, server)))
    for table in (registry.resources, registry.templates):
        for entry in table.values():
            uri = prefixed_uri(prefix, entry.uri)
            found.add_resource(replace(entry, uri=uri, signature=_from(entry.signature, server)))
    for prompt in registry.prompts.values():
        name = prefixed_name(prefix, prompt.name)
        found.add_prompt(replace(prompt, name=name, signature=_from(prompt.signature, server)))
    for (kind, target), completer in registry.completers.items():
        if kind == "ref/prompt":
            found.add_completer((kind, prefixed_name(prefix, target)), completer)
        else:
            found.add_completer((kind, prefixed_uri(prefix, target)), completer)
    return found
