"""`gdx lint` and `gdx hash`: the command, its report, the engines' compiles and proofs, request logs."""
