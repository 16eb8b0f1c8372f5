"""``--config FILE``: a YAML or TOML file of a command's option values, keyed by option name.

:func:`apply_config` turns each key into that option on the command line *before* what the
user typed (so the command line wins) and parses it with the same argparse types, so a bad
value in the file is refused exactly as on the command line. :func:`read_config` reads the
mapping (TOML for ``.toml``, YAML otherwise).
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from scimech.errors import ConfigError

__all__ = ["read_config", "apply_config", "keys_as_written"]


def read_config(path: str | Path) -> dict[str, Any]:
    """A ``--config`` file's mapping: TOML (``.toml``) or YAML (anything else), keys as strings."""

    path = Path(path)
    text = path.read_text()
    if path.suffix.lower() == ".toml":
        try:
            loaded = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{path}: not valid TOML ({err}).") from err
    else:
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML ({err}); a file not named .toml is read as YAML.") from err
    loaded = {} if loaded is None else loaded
    if not isinstance(loaded, Mapping):
        raise ConfigError(
            f"{path}: a config file is a mapping of option names to values "
            f"(e.g. `seeds: [0, 1]`); got {type(loaded).__name__}."
        )
    odd = [k for k in loaded if not isinstance(k, str)]
    if odd:  # YAML 1.1 reads on/off/yes/no (unquoted) as booleans, 1: as a number
        written = keys_as_written(path) or odd
        raise ConfigError(
            f"{path}: key(s) {', '.join(map(repr, written))} are not names (YAML reads unquoted on, off, "
            "yes, no, null as true/false/null and digits as numbers); write option names, quoted if "
            "need be."
        )
    return dict(loaded)


def keys_as_written(path: str | Path, section: str | None = None) -> list[str]:
    """The keys of a YAML file (or of its mapping ``section``) that YAML does not read as names
    (``off`` -> false, ``null`` -> None, ``1`` -> 1), as they are written in the file."""
    try:
        node = yaml.compose(Path(path).read_text())
    except yaml.YAMLError:
        return []
    if section is not None and node is not None and isinstance(node, yaml.MappingNode):
        node = next((v for k, v in node.value if k.value == section), None)
    if node is None or not isinstance(node, yaml.MappingNode):
        return []
    return [k.value for k, _ in node.value if not isinstance(yaml.safe_load(k.value or "~"), str)]


def _option_tokens(
    action: argparse.Action, key: str, value: Any, path: Path, parser: argparse.ArgumentParser | None = None
) -> list[str]:

    flag = max(action.option_strings, key=len)
    if action.nargs == 0:  # a switch
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: {key} is a switch: give true or false, not {value!r}.")
        return [flag] if value == isinstance(action, argparse._StoreTrueAction) else []
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if isinstance(value, (list, tuple)) and action.nargs in (None, "?"):
        raise ConfigError(f"{path}: {key} takes one value, not a list ({value!r}).")
    if any(isinstance(v, (Mapping, list, tuple)) for v in values):
        raise ConfigError(f"{path}: {key}: {value!r} is not a value the option takes.")
    tokens = ["true" if v is True else "false" if v is False else str(v) for v in values]
    for token in tokens:  # checked here, so that the error names the file (the flag may not have been typed)
        try:
            parsed = action.type(token) if callable(action.type) else token
            if action.choices is not None and parsed not in action.choices:
                raise argparse.ArgumentTypeError(
                    f"invalid choice: {token!r} (choose from {', '.join(map(repr, action.choices))})"
                )
        except (argparse.ArgumentTypeError, TypeError, ValueError) as err:
            message = f"argument {flag}: {err} (from {key}: in the --config file {path})"
            if parser is None:
                raise ConfigError(message) from None
            parser.error(message)
    return [flag, *tokens]


def apply_config(root: argparse.ArgumentParser, argv: Sequence[str], args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with the ``--config`` file's values filled in: each key is one of the command's
    options (``n_train`` or ``n-train``), turned into that option on the command line *before*
    what the user typed (so the command line wins) and parsed by the same argparse types,
    so a bad value in the file is refused exactly as on the command line. Keys the command
    declared in ``config_keys`` go to ``args.config_extra``; any other key is one clear error
    listing the keys the command takes."""

    path = Path(args.config)
    values = read_config(path)
    parser, at = _subparser_for(root, argv)
    actions = {a.dest: a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS}
    for hidden in ("help", "config", "dry_run"):
        actions.pop(hidden, None)
    extra_keys = dict(getattr(args, "_config_keys", {}) or {})
    renamed = {
        a.option_strings[0].lstrip("-").replace("-", "_"): a
        for a in parser._actions
        if a.option_strings and getattr(a, "deprecated_for", None)
    }  # old spellings, for one release
    tokens, extra = [], {}
    for key, value in values.items():
        dest = key.replace("-", "_")
        if dest in actions:
            tokens += _option_tokens(actions[dest], key, value, path, parser)
        elif dest in renamed:  # parsed as the old flag: the same warning as on the command line
            tokens += _option_tokens(renamed[dest], key, value, path, parser)
        elif key in extra_keys:
            extra[key] = value
        else:
            known = sorted(actions) + sorted(extra_keys)
            raise ConfigError(f"{path}: unknown key {key!r}; `{parser.prog}` takes: {', '.join(known)}.")
    new = root.parse_args([*argv[:at], *tokens, *argv[at:]])
    new.config_extra = extra
    return new


def _subparser_for(root: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[argparse.ArgumentParser, int]:
    """The (sub)parser that handles the command ``argv`` names (an alias included), and the index in
    ``argv`` just after its last command word (where a config file's options go)."""
    parser, at = root, 0
    for i, word in enumerate(argv):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            if word.startswith("-"):
                break
            continue
        parser, at = subs[0].choices[word], i + 1
    return parser, at
