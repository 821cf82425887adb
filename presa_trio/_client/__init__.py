"""The client behind ``presa-trio list``, ``call`` and ``read``: a pure wire layer
(``wire``, ``arguments``), three transports, and one connection that drives them."""
