"""The one error type of lcm: an expected failure, printed by lcm.cli.run as `Error: message`
and `Hint: hint` with exit 1. Nothing else lives here, so every module can import it."""


class LcmError(Exception):
    """An expected failure: printed as `Error: message` + `Hint: hint`, exit 1."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
