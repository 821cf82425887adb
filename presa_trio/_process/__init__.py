"""What belongs to the process that owns the server: the supervisor of ``presa-trio serve
--workers``, and the bound on a shutdown that ends the process.

No protocol here, and nothing a library embedded in another program should call on its own.
"""
