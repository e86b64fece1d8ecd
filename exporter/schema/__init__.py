"""Schema analysis: pure functions, standard library only (the probe imports them inside engines)."""
