"""`gdx lint --prove`: counterexamples that show what a grammar engine lets through.

The lint tables say which keywords xgrammar drops; a proof shows it on the user's own schema: an
instance the real engine accepts token by token and a standard validator rejects at the finding's
pointer. Needs the engines and `jsonschema` (the `prove` extra); the daemon never imports this.
"""
