"""The one exception type whose message is meant for the user, not for a traceback."""


class UserError(Exception):
    """Bad input (config, path, resources, environment name...).

    The message says what is wrong and what to do. Scripts print it and exit with code 2.
    """

    exit_code = 2
