"""Example servers; serve one with ``presa-trio serve examples.weather:server --stdio``."""
