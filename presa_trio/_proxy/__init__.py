"""``presa-trio proxy``: forward MCP traffic (Streamable HTTP or stdio), checking and recording
every message as it passes. The command is ``command.add_parser``; nothing here is public."""

from __future__ import annotations

from .command import add_parser as add_parser
from .command import split_command as split_command
