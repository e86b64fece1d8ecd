"""Helpers only the tests use."""
