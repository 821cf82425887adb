"""The trio kernel: one request (dispatcher, context, calling a handler) and one run (runtime,
bus, listen streams, tracing), between the pure protocol below and the transports above.

It does no I/O of its own: transports hand it bytes already read, backends hold what is
shared.
"""
