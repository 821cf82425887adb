"""Builders for MRTR input requests (elicitation, sampling, roots), for ``await ctx.input(...)``.

``InputRequired`` is the signal a plain request's ``ctx.input`` raises to end its round; you
never raise or catch it yourself. See ``presa_trio._protocol.input_requests`` for the rules.
"""

from ._protocol.input_requests import InputRequired as InputRequired
from ._protocol.input_requests import elicit as elicit
from ._protocol.input_requests import elicit_url as elicit_url
from ._protocol.input_requests import list_roots as list_roots
from ._protocol.input_requests import sample as sample

__all__ = ["InputRequired", "elicit", "elicit_url", "list_roots", "sample"]
