"""Builders for MRTR input requests (elicitation, sampling, roots), for ``await ctx.input(...)``.

``InputRequired`` is the signal a plain request's ``ctx.input`` raises to end its round; you
never raise or catch it yourself. See ``presa_trio._mrtr`` for the rules.
"""

from ._mrtr import InputRequired as InputRequired
from ._mrtr import elicit as elicit
from ._mrtr import elicit_url as elicit_url
from ._mrtr import list_roots as list_roots
from ._mrtr import sample as sample

__all__ = ["InputRequired", "elicit", "elicit_url", "list_roots", "sample"]
