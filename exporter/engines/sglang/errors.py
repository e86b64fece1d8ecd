"""What SGLang answers instead of a grammar: a rejection (the error and its message) or input past what
this package vouches for."""

from __future__ import annotations


class SglangRejected(Exception):
    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class SglangTooComplex(Exception):
    pass
