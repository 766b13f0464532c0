"""The one error type of lcm: an expected failure, printed by lcm.cli.run as `Error: message`
and `Hint: hint` with exit 1, and the kinds of it that callers tell apart (a model call that
failed). Nothing else lives here, so every module can import it."""
from __future__ import annotations  # `str | None` below: the hooks import this on Python 3.9 too


class LcmError(Exception):
    """An expected failure: printed as `Error: message` + `Hint: hint`, exit 1."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class ModelError(LcmError):
    """A model call failed (after the retries the backend allows)."""


class ModelConfigError(ModelError):
    """Missing or refused credentials, unknown model, missing backend: retrying cannot help."""


class ModelRequestError(ModelError):
    """The API refused this one request (too long, malformed): the backend itself works."""
