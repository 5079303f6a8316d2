"""The one error type the library raises for bad input."""


class InputError(ValueError):
    """A value the user gave cannot be used.

    The message names the input, the value received, what is allowed and what to do,
    so the CLI and the dashboard can show it as it is, without a traceback.
    """


def require(condition: bool, message: str) -> None:
    """Raise ``InputError(message)`` unless ``condition`` holds."""
    if not condition:
        raise InputError(message)
