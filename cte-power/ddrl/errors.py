"""The one exception type whose message is meant for the user, not for a traceback, and the
closest valid name that such messages suggest."""

import difflib


class UserError(Exception):
    """Bad input (config, path, resources, environment name...).

    The message says what is wrong and what to do. Scripts print it and exit with code 2.
    """

    exit_code = 2


def closest(name, choices) -> str | None:
    """The valid name closest to a misspelled ``name`` (for "did you mean"), or None."""
    close = difflib.get_close_matches(str(name), list(choices), n=1)
    return close[0] if close else None
