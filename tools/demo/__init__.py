"""`make demo`: the per-tenant enum incident, reproduced on a real vLLM and caught (see __main__)."""
