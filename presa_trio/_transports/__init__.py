"""Transports: thin edges that turn I/O into dispatcher calls."""
