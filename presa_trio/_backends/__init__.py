"""Where a run keeps what its workers share: the backend protocol and the in-memory backend,
the shared backend on SQL (its loops each behind a boundary), SQLite and PostgreSQL.

It knows nothing of MCP messages: it carries signals, leases and keys.
"""
