"""`make demo`: the first seed's incident, reproduced on a real vLLM and caught (see __main__)."""
