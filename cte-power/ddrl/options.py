"""Command-line building blocks every entry point shares (``ddrl``, ``scripts/*/*.py``): one-line
errors with exit code 2, number types with bounds, ``NAME=NUMBER`` pairs, ``--set``."""

from __future__ import annotations

import argparse
import math
import sys

from ddrl.errors import UserError


def report_errors(main):
    """Decorate a script's main(argv): a UserError becomes one 'error:' line and exit code 2."""
    import functools

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except UserError as err:
            print(f"error: {err}", file=sys.stderr)
            return err.exit_code

    return wrapper


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, whose errors are one line as every other error of ours (argparse's
    own print the usage first): ``error: <what> (see <script> --help)``, exit code 2."""

    def error(self, message: str):
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(UserError.exit_code)


def whole(low: int, high: int | None = None):
    """An argparse type: a whole number from ``low`` (to ``high``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bounds = f"at least {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {value}")
        return value

    return parse


def real(above: float | None = None, at_least: float | None = None, high: float | None = None):
    """An argparse type: a finite number above ``above`` (or at least ``at_least``, at most ``high``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if above is not None and value <= above:
            raise argparse.ArgumentTypeError(f"must be above {above:g}, got {value:g}")
        if at_least is not None and value < at_least:
            raise argparse.ArgumentTypeError(f"must be at least {at_least:g}, got {value:g}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high:g}, got {value:g}")
        return value

    return parse


def pairs(items: list[str], kind, option: str, example: str, names=None) -> dict:
    """``NAME=NUMBER`` items of an option (``--budget SAC=20000``) as a dict; each number parsed
    by ``kind`` (a ``whole``/``real`` type), each name one of ``names`` if given; a bad item is
    one ``UserError`` line naming the option and an example."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            float(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise UserError(f"--{option} '{item}': expected NAME=NUMBER, e.g. --{option} {example}")
        if names is not None and name not in names:
            raise UserError(f"--{option} '{item}': {name!r} is not one of {', '.join(names)}")
        try:
            out[name] = kind(value)
        except argparse.ArgumentTypeError as err:
            raise UserError(f"--{option} '{item}': the number {err}") from None
    return out


def add_overrides(
    parser: argparse.ArgumentParser,
    help: str = "override a config value, e.g. --set stop.env_steps=200000 (repeatable)",
) -> None:
    """The ``--set KEY.PATH=VALUE`` option (``args.overrides``) of every command that reads a config."""
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE", help=help
    )
