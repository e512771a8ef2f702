"""The vocabulary of the settings model (``model.py``, ``extension_model.py``): how a field
says what it is.

A field ``snake_case_name`` is the TOML key ``snake-case-name`` (a trailing underscore, as in
``if_``, is dropped). ``field(metadata=...)`` carries everything the three consumers need:

``help``            one paragraph for the schema description and the reference docs
``pattern``         regex every string in the value must match (also a schema ``pattern``)
``pattern_help``    what a value failing ``pattern`` is not (for the error message)
``check``           extra check for every string in the value: returns an error or None
``multiline``       the strings may hold line breaks (every other string is refused with one,
                    since strings become file names and command-line arguments)
``format``          JSON-schema ``format`` for validate-pyproject (documentation only here)
``key_pattern``     regex every key of a table value must match (schema ``propertyNames``)
``minimum``         smallest allowed integer
``maximum``         largest allowed integer
``min_items``       smallest allowed list length
``config_setting``  the key may also be given as ``-C key=value``
``env``             environment variable that sets the key (below -C, above pyproject); every
                    face reads it, as the BuildOptions field of the same name
``option``          how a value becomes that BuildOptions field (default: unchanged)
``runs_only``       the value changes how a build runs, not what it builds (the JIT's warm
                    check leaves its variable out)
``flatten``         a ``Partial`` whose keys sit directly in the enclosing table
``exclude``         keys of a ``Partial`` that are not allowed there
``appendable_only`` a ``Partial`` that accepts only list and table keys (``append``)
"""

from __future__ import annotations

from dataclasses import MISSING, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")

MODULE_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
IDENTIFIER_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class Partial(dict[str, Any], Generic[T]):
    """Type marker: a table holding some of ``T``'s keys, parsed to ``{field name: value}``."""


def setting(default: Any = MISSING, *, help: str, factory: Any = MISSING, **meta: Any) -> Any:
    """A dataclass field carrying the model metadata (see the module docstring)."""
    if factory is not MISSING:
        return field(default_factory=factory, metadata={"help": help, **meta})
    return field(default=default, metadata={"help": help, **meta})


def toml_key(field_name: str) -> str:
    """The TOML key of a field: ``if_`` -> ``if``, ``extra_cflags`` -> ``extra-cflags``."""
    return field_name.rstrip("_").replace("_", "-")
