"""Where settings come from: the environment and a `.env` file in the working directory,
merged into the input of bot.settings.Settings (a pydantic model, which validates it).

The rules are pydantic-settings' for Settings' configuration, which this replaces because
importing it was 0.1 s of every command (docs/decisions/0051-settings-without-pydantic-settings.md;
tests/test_settings_env.py pins each rule):

- a field's variables are its aliases in order (REDIS_URL, CITEBOT_REDIS_URL), then CITEBOT_
  and its name; names match in any case; the first one set wins;
- an empty value is a value (each validator says what empty means), the word None too;
- the environment wins over `.env`, and what the caller gives (load_settings' overrides)
  over both, matched by alias or name in any case;
- `.env` is parsed by python-dotenv as pydantic-settings did (quotes, `export `, comments,
  ${VAR} from earlier lines and the environment; a name without `=` is unset), and only
  imported when there is one;
- every other name, in either source, is ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import AliasChoices

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

PREFIX = "CITEBOT_"
ENV_FILE = Path(".env")


def aliases(info: FieldInfo) -> list[str]:
    """A field's alias names in order of preference, or [] for one without."""
    alias = info.validation_alias
    return [str(c) for c in alias.choices] if isinstance(alias, AliasChoices) else []


def read_env_file(path: Path) -> dict[str, str | None]:
    """The file's NAME=value pairs, names lower-cased; {} when there is no file."""
    if not (path.is_file() or path.is_fifo()):
        return {}
    from dotenv import dotenv_values  # 3 ms of imports, paid only with a .env

    return {name.lower(): value for name, value in dotenv_values(path, encoding="utf-8").items()}


def settings_input(
    fields: Mapping[str, FieldInfo],
    overrides: Mapping[str, Any],
    environ: Mapping[str, str] = os.environ,
    env_file: Path = ENV_FILE,
) -> dict[str, Any]:
    """The model's input: each field found, keyed by its first alias or else its name."""
    sources = ({name.lower(): value for name, value in environ.items()}, read_env_file(env_file))
    given = {name.lower(): name for name in reversed(list(overrides))}  # the first of a case-folded pair
    data: dict[str, Any] = {}
    for field, info in fields.items():
        choices = aliases(info)
        key = choices[0] if choices else field
        variables = [c.lower() for c in choices] + [(PREFIX + field).lower()]
        found = next((s[v] for s in sources for v in variables if s.get(v) is not None), None)
        if found is not None:
            data[key] = found
        passed = next((given[n] for n in (*(c.lower() for c in choices), field) if n in given), None)
        if passed is not None:
            data[key] = overrides[passed]
    return data
