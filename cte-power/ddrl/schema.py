"""Our own settings' schema: pydantic models with strict types and unknown keys refused, and
one-line messages (with "did you mean") for every error. The experiment file's groups
(``ddrl.pipeline.experiment``) and the toolkits' ``env_config`` (Unity) are checked with it.
"""

from __future__ import annotations

import inspect
import types
import typing
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ddrl.errors import UserError, closest


class Section(BaseModel):
    """A group of our own settings: unknown keys are errors, types are strict (YAML's 1e-4,
    which it reads as text, is accepted as a number by ``expect_type`` before this)."""

    model_config = ConfigDict(extra="forbid", strict=True)


_PYDANTIC_PHRASES = {
    "bool_type": "true/false",
    "int_type": "an integer",
    "float_type": "a number",
    "int_from_float": "an integer",
    "none_required": "null",
    "finite_number": "a finite number",
}


def validated(model: type[Section], section: Any, name: str, where: str) -> dict:
    """``section`` checked by ``model``, as a dict (``checked``'s model dumped)."""
    return checked(model, section, name, where).model_dump()


def checked(model: type[Section], section: Any, name: str, where: str) -> Section:
    """``section`` checked by ``model``; our one-line messages (with "did you mean") on errors."""
    section = {} if section is None else section
    if not isinstance(section, dict):
        raise UserError(f"'{name}'{where} must be a mapping, e.g. {name}: {model().model_dump()}.")
    known = tuple(model.model_fields)
    for key in section:
        check_known_key(key, known, f"'{name}'{where}")
    numeric = {
        key: expect_type(value, _field_types(model, key), f"{name}.{key}")
        for key, value in section.items()
    }
    try:
        return model(**numeric)
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(part) for part in first["loc"] if not isinstance(part, int))
        key = key.split(".")[0]
        if first["type"] == "missing":
            raise UserError(
                f"'{name}.{key}'{where} is required here; add it to the config file."
            ) from None
        phrase = _PYDANTIC_PHRASES.get(
            first["type"], first["msg"].removeprefix("Input should be ").lower()
        )
        raise UserError(
            f"'{name}.{key}' must be {phrase}, got {section.get(key)!r}. "
            f"Fix it in the config file or with --set {name}.{key}=VALUE."
        ) from None


def _field_types(model: type[Section], key: str) -> tuple[type, ...] | None:
    """The plain types a field takes (for expect_type's conversion of numbers written as text)."""

    def plain(annotation) -> tuple[type, ...]:
        if typing.get_origin(annotation) is Annotated:
            return plain(typing.get_args(annotation)[0])
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            return tuple(t for arg in typing.get_args(annotation) for t in plain(arg))
        return (annotation,)

    found = plain(model.model_fields[key].annotation)
    return (
        found if all(isinstance(t, type) for t in found) else None
    )  # Literal, dict[...]: pydantic's


def check_known_key(key: Any, known: tuple[str, ...], where: str) -> None:
    if key in known:
        return
    close = closest(key, known)
    hint = f" Did you mean '{close}'?" if close else ""
    shown = ", ".join(known) if len(known) <= 12 else ", ".join(known[:12]) + ", ..."
    raise UserError(f"unknown key '{key}' at {where}.{hint} Valid keys: {shown}.")


_SIMPLE_TYPES = {int, float, str, bool, dict, list, type(None)}

#: The largest whole number a setting takes: beyond 2**53 a float (YAML reads 1e6 as one) no
#: longer holds every integer, and no count, step budget or seed comes near it.
LARGEST_WHOLE_NUMBER = 2**53


def allowed_types(annotation: Any) -> tuple[type, ...] | None:
    """Plain Python types a YAML value may have for ``annotation``; None means anything goes."""
    if annotation is inspect.Parameter.empty or annotation is Any or isinstance(annotation, str):
        return None
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        allowed: set[type] = set()
        for arg in typing.get_args(annotation):
            sub = allowed_types(arg)
            if sub is None:
                return None
            allowed |= set(sub)
        return tuple(allowed)
    base = origin or annotation
    if base in (tuple, list) or (isinstance(base, type) and issubclass(base, (list, tuple))):
        return (list,)
    if base is dict or (isinstance(base, type) and issubclass(base, dict)):
        return (dict,)
    return (base,) if base in _SIMPLE_TYPES else None


def expect_type(value: Any, allowed: tuple[type, ...] | None, name: str) -> Any:
    """Return ``value`` (numbers written as text converted) if it has an allowed type, else fail."""
    if allowed is None or value is None and type(None) in allowed:
        return value
    numeric = int in allowed or float in allowed
    if isinstance(value, str) and numeric and str not in allowed:
        try:  # YAML 1.1 reads 1e-4 and 1e6 as text
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool):
        ok = bool in allowed
    elif isinstance(value, int):
        ok = numeric
    elif isinstance(value, float):
        if (
            float not in allowed
            and int in allowed
            and value.is_integer()
            and abs(value) <= LARGEST_WHOLE_NUMBER
        ):
            value = int(value)
        ok = float in allowed or isinstance(value, int)
    else:
        ok = isinstance(value, tuple(t for t in allowed if t is not type(None)))
    if (
        ok
        and isinstance(value, int)
        and not isinstance(value, bool)
        and abs(value) > LARGEST_WHOLE_NUMBER
    ):
        raise UserError(
            f"'{name}' is {value:.4g}, larger than any setting takes (at most 2**53). "
            f"Fix it in the config file or with --set {name}=VALUE."
        )
    if not ok:
        names = sorted({_TYPE_NAMES.get(t, t.__name__) for t in allowed})
        raise UserError(
            f"'{name}' must be {' or '.join(names)}, got {value!r} ({_TYPE_NAMES.get(type(value), type(value).__name__)}). "
            f"Fix it in the config file or with --set {name}=VALUE."
        )
    return value


_TYPE_NAMES = {
    int: "an integer",
    float: "a number",
    str: "text",
    bool: "true/false",
    dict: "a mapping",
    list: "a list",
    type(None): "null",
}
