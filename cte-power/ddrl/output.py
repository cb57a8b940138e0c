"""The one way our commands and launchers print a line of progress."""


def say(line: str, source: str | None = None) -> None:
    """``line`` on stdout, flushed at once (Slurm's and SageMaker's logs are read while a run
    goes on), after ``source:`` when given (whose line it is in a log shared with Ray's)."""
    print(f"{source}: {line}" if source else line, flush=True)
