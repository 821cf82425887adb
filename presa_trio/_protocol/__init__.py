"""The pure protocol core: JSON-RPC envelopes, the 2026-07-28 dialect, HTTP admission, SSE.

Nothing in this package imports trio or touches I/O; every function takes values and returns
values (or raises an ``McpError``), so it is tested synchronously.
"""
