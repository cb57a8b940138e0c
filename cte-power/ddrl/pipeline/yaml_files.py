"""Experiment files as YAML: read strictly (a key given twice, or values nested too deep, is an
error), ``--set key.path=value`` overrides applied, and written back."""

from __future__ import annotations

import copy

import yaml

from ddrl.errors import UserError


class DuplicateKeyError(yaml.YAMLError):
    pass


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (PyYAML
    silently keeps the last one, so a setting written twice is half-ignored)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise DuplicateKeyError(
                    f"the key '{key}' is given twice (line {key_node.start_mark.line + 1})"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _StrictLoader.construct_mapping
)


#: Levels of nesting a settings file may have (a few are used); deeper input would exhaust
#: Python's recursion limit in the YAML parser or in the checks after it.
MAX_DEPTH = 32


class UnreadableYAMLError(yaml.YAMLError):
    """YAML that parses but cannot be used: nested too deep, or a number Python will not convert."""


def read_yaml(text: str):
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader)
    except RecursionError:
        too_deep = True
    except ValueError as err:  # e.g. an integer of more digits than Python converts (4,300)
        raise UnreadableYAMLError(f"a value cannot be read ({err})") from None
    else:
        too_deep = nesting_depth(data) > MAX_DEPTH
    if too_deep:
        raise UnreadableYAMLError(
            f"its values nest more than {MAX_DEPTH} levels deep (settings nest a few levels)"
        )
    return data


def nesting_depth(value) -> int:
    """Levels of lists and mappings in ``value`` (0 for a plain value), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        deepest = max(deepest, depth + 1)
        if depth + 1 <= MAX_DEPTH:
            stack.extend((child, depth + 1) for child in children)
    return deepest


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply ``--set a.b.c=value`` strings; values are read as YAML (``1e-4``, ``[64, 64]``...)."""
    raw = copy.deepcopy(raw)
    for item in overrides:
        key_path, sep, text = item.partition("=")
        if not sep or not key_path.strip():
            raise UserError(
                f"--set '{item}': expected KEY.PATH=VALUE, e.g. --set training.lr=0.0003"
            )
        shown = item if len(item) <= 60 else item[:57] + "..."
        try:
            value = read_yaml(text)
        except (DuplicateKeyError, UnreadableYAMLError) as err:
            raise UserError(f"--set '{shown}': {err}.") from None
        except yaml.YAMLError:
            raise UserError(
                f"--set '{shown}': the value is not valid YAML; quote it, e.g. --set 'a.b=[1, 2]'."
            ) from None
        keys = key_path.strip().split(".")
        node = raw
        for depth, key in enumerate(keys[:-1]):
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                where = ".".join(keys[: depth + 1])
                raise UserError(f"--set '{item}': '{where}' is a value, not a group of settings.")
            node = child
        node[keys[-1]] = value
    return raw


def dump_yaml(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)
