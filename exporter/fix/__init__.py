"""`gdx fix`: from a family's finding to its remedy (the static schema, the check after decoding)."""
