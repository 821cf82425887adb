"""Protocol extensions built on presa_trio's generic extension hooks."""
