"""What a Python function becomes: its signature's types as JSON Schema, lax conversion of
arguments, and results shaped for the wire.

Pure: no trio, no I/O. The kernel calls it; it knows nothing of requests or runs.
"""
