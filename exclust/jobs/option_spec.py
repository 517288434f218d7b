"""One option of a job, declared once (``Option``), and what it becomes on the config and the command line.

A job's options (``exclust.jobs.options``: ``EXPLAIN``, ``LABEL``) are a tuple of ``Option``. From
that tuple come the job's config dataclass (``config_class``), its ``exclust`` arguments
(``add_arguments``, read back by ``config_values``) and, in ``flows.params``, the Prefect form's
pydantic model. An algorithm's own options are ``Option``s on its registry entry
(``registry.Algorithm.own_options``) and join the explain schema from there.

One name per option everywhere: the config field, the flow parameter and ``--long-name`` (with
``_`` as ``-``). Older spellings stay accepted as aliases (``--k``, ``--seed``, the flow's
``columns``), and a few old flags set a value (``--drop-nan`` is ``--nan-policy drop``).
"""
from __future__ import annotations

import argparse
import dataclasses
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Where an option appears.
CONFIG, CLI, FLOW = "config", "cli", "flow"
EVERYWHERE = frozenset({CONFIG, CLI, FLOW})

# What kind of value an option holds; each kind has one spelling per surface.
TEXT = "text"  # str; None when unset (the form: blank)
NAMES = "names"  # list[str] or None; comma-separated text on the command line and in the form
WHOLE = "whole"  # int (the form spells None as ``flow_unset``)
NUMBER = "number"  # float (likewise)
CHOICE = "choice"  # one of ``choices()``; the form's drop-down
SWITCH = "switch"  # bool
AUTO_SWITCH = "auto-switch"  # bool or None (None: the run decides); the form's auto / on / off
MAPPING = "mapping"  # dict or None: KEY=VALUE on the command line (repeatable), key=value text or JSON in the form
ANYTHING = "anything"  # the config only (an array, a DataFrame, a path): the command line and the form take text
KINDS = (TEXT, NAMES, WHOLE, NUMBER, CHOICE, SWITCH, AUTO_SWITCH, MAPPING, ANYTHING)


@dataclass(frozen=True)
class Option:
    """One option of a job: its one name, kind, default, help and where it appears.

    Parameters
    ----------
    name : str
        The config field and flow parameter; ``--name`` (``_`` as ``-``) on the command line.
    kind : str
        One of ``KINDS``.
    default : object, default None
        The value when unset (the config's and the command line's; the form spells None as ``flow_unset``).
    help : str, default ""
        One line, lower case, no final stop: the command line's help and (capitalised) the form's description.
    choices : callable or None
        () -> names, read from a registry when asked (plugins included).
    describe_choices : callable or None
        () -> {name: one line}: the command line's help lists one choice a line.
    unset_means : str or None
        What None means, said in the help ("default: k", "blank: the latest").
    cli_aliases, flow_aliases, config_aliases : tuple of str
        Older spellings still accepted (``--k``; the form's ``columns``; ``ExplainConfig(k=...)``).
    cli_flags : tuple of (flag, value)
        Old flags that set a value (``("--drop-nan", "drop")``).
    surfaces : frozenset of str
        Where it appears (``CONFIG``, ``CLI``, ``FLOW``).
    required : bool, default False
    minimum, maximum : number or None
        Bounds the command line and the form check (``check()`` keeps the config's own messages).
    unit : str or None
        What a whole number counts ("clusters"), for the command line's message.
    flow_unset : object
        The form's spelling of None for a number (0, -1).
    flow_type : str or None
        The name of the form's enumeration (``Algorithm``, ``ReferenceKind``).
    flow_help : str or None
        The form's description when it must say more than ``help``.
    metavar : str or None
    cli_type : callable or None
        argparse's ``type`` when the command line takes more than the choices (``labels:COLUMN``).
    """

    name: str
    kind: str
    default: Any = None
    help: str = ""
    choices: Callable[[], Sequence[str]] | None = dataclasses.field(default=None, compare=False)
    describe_choices: Callable[[], Mapping[str, str]] | None = dataclasses.field(default=None, compare=False)
    unset_means: str | None = None
    cli_aliases: tuple[str, ...] = ()
    cli_flags: tuple[tuple[str, Any], ...] = ()
    flow_aliases: tuple[str, ...] = ()
    config_aliases: tuple[str, ...] = ()
    surfaces: frozenset[str] = EVERYWHERE
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    unit: str | None = None
    flow_unset: Any = None
    flow_type: str | None = None
    flow_help: str | None = None
    metavar: str | None = None
    cli_type: Callable[[str], Any] | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name!r}: kind must be one of {', '.join(KINDS)}, not {self.kind!r}")

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def needed(self) -> bool:
        """Required with no default: the config and the form require it (``required`` with a default: the command
        line only)."""
        return self.required and self.default is None

    def on(self, surface: str) -> bool:
        return surface in self.surfaces

    def but(self, **changes: Any) -> Option:
        """This option with some fields changed (the demo's defaults)."""
        return dataclasses.replace(self, **changes)

    def choice_names(self) -> tuple[str, ...]:
        return tuple(self.choices()) if self.choices is not None else ()


def by_name(options: Sequence[Option]) -> dict[str, Option]:
    """``options`` by name; ValueError when two differ under one name (one name, one meaning)."""
    named: dict[str, Option] = {}
    for option in options:
        if option.name in named and named[option.name] != option:
            raise ValueError(f"two different options are named {option.name!r}")
        named.setdefault(option.name, option)
    return named


# --------------------------------------------------------------------------- the config
def config_class(name: str, options: Sequence[Option], base: type, doc: str) -> type:
    """A dataclass named ``name`` on ``base`` with one field per config option, in order (required first).

    Old names (``config_aliases``) stay readable and writable as properties and accepted by ``__init__``.
    """
    fields: list[tuple[str, Any, Any]] = []
    for option in sorted((o for o in options if o.on(CONFIG)), key=lambda o: not o.needed):
        if option.needed:
            fields.append((option.name, Any, dataclasses.field()))
        else:
            fields.append((option.name, Any, dataclasses.field(default=option.default)))
    aliases = {old: o.name for o in options if o.on(CONFIG) for old in o.config_aliases}
    namespace = {old: _alias_property(new) for old, new in aliases.items()}
    cls = dataclasses.make_dataclass(name, fields, bases=(base,), namespace=namespace)
    cls.__module__ = base.__module__
    cls.__doc__ = doc + "\n\nFields (from the options schema): " + ", ".join(f[0] for f in fields) + "."
    if aliases:
        init = vars(cls)["__init__"]  # the dataclass's own

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            for old, new in aliases.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{name}() got both {new!r} and its old name {old!r}")
                    kwargs[new] = kwargs.pop(old)
            init(self, *args, **kwargs)

        __init__.__doc__ = init.__doc__
        cls.__init__ = __init__  # type: ignore[misc]
    return cls


def _alias_property(new: str) -> property:
    def get(self: Any) -> Any:
        return getattr(self, new)

    def set_(self: Any, value: Any) -> None:
        setattr(self, new, value)

    return property(get, set_, doc=f"the old name of ``{new}``")


# --------------------------------------------------------------------------- the command line
class OneChoiceALineFormatter(argparse.HelpFormatter):
    """argparse's help, but a help text's own line breaks kept (``--algorithm``: one algorithm a line)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return [wrapped for line in text.splitlines()
                for wrapped in (textwrap.wrap(line, width, subsequent_indent="    ") or [""])]


def names_text(text: str | None) -> list[str] | None:
    """``"a, b,c"`` -> ``["a", "b", "c"]``; blank or None -> None."""
    if text is None:
        return None
    names = [t.strip() for t in str(text).split(",") if t.strip()]
    return names or None


def whole_number(option: Option) -> Callable[[str], int]:
    """argparse's ``type`` for a whole number within the option's bounds, one wording for every value below."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        low, high = option.minimum, option.maximum
        if low is not None and value < low:
            if option.unit:
                raise argparse.ArgumentTypeError(f"expected at least {low:g} {option.unit}, got {value}")
            if low == 1:
                raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
            raise argparse.ArgumentTypeError(f"expected a number >= {low:g}, got {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"expected at most {high:g}, got {value}")
        return value

    parse.__name__ = option.name  # argparse names the type in "invalid ... value" messages
    return parse


def cli_help(option: Option, used_by: Sequence[str] = ()) -> str:
    """The command line's help of ``option``: its line, its default, its old spellings, who reads it."""
    text = option.help
    if option.unset_means and option.default is None:
        text += f" (default: {option.unset_means})"
    elif option.kind in (CHOICE, NUMBER, WHOLE) and option.default is not None and not option.required:
        text += f" (default {option.default})"
    if used_by:
        text += f"; for {', '.join(used_by)}"
    if option.cli_flags:
        text += "; " + ", ".join(f"{flag} is {_value_flag(option, value)}" for flag, value in option.cli_flags)
    if option.describe_choices is not None:
        text += ":\n" + "\n".join(f"  {name}: {line}" for name, line in option.describe_choices().items())
    return text


def _value_flag(option: Option, value: Any) -> str:
    if option.kind == SWITCH:
        return option.flag if value else "--no-" + option.flag[2:]
    return f"{option.flag} {value}"


def add_arguments(parser: Any, options: Sequence[Option], *,
                  used_by: Mapping[str, Sequence[str]] | None = None) -> None:
    """One ``add_argument`` per command-line option of ``options`` (its old spellings as aliases)."""
    for option in options:
        if not option.on(CLI):
            continue
        kwargs: dict[str, Any] = {"dest": option.name, "help": cli_help(option, (used_by or {}).get(option.name, ()))}
        if option.metavar:
            kwargs["metavar"] = option.metavar
        if option.kind == SWITCH:
            kwargs.update(action=argparse.BooleanOptionalAction, default=bool(option.default))
            kwargs.pop("metavar", None)
        elif option.kind == AUTO_SWITCH:
            kwargs.update(action=argparse.BooleanOptionalAction, default=None)
            kwargs.pop("metavar", None)
        elif option.kind == MAPPING:
            kwargs.update(action="append", default=None)
            kwargs.setdefault("metavar", "KEY=VALUE")
        else:
            kwargs["default"] = option.default
            kwargs["required"] = option.required
            if option.kind == WHOLE:
                kwargs["type"] = whole_number(option)
            elif option.kind == NUMBER:
                kwargs["type"] = float
            elif option.cli_type is not None:
                kwargs["type"] = option.cli_type
            elif option.kind == CHOICE and option.choices is not None:
                kwargs["choices"] = option.choice_names()
        parser.add_argument(option.flag, *option.cli_aliases, **kwargs)
        for flag, value in option.cli_flags:
            parser.add_argument(flag, dest=option.name, action="store_const", const=value, help=argparse.SUPPRESS)


def config_values(options: Sequence[Option], args: argparse.Namespace) -> dict[str, Any]:
    """The config fields the command line set (``args`` parsed by ``add_arguments``), as the config holds them."""
    values: dict[str, Any] = {}
    for option in options:
        if not (option.on(CLI) and option.on(CONFIG)) or not hasattr(args, option.name):
            continue
        value = getattr(args, option.name)
        if option.kind == NAMES:
            value = names_text(value)
        elif option.kind == MAPPING:
            from exclust.sources.storage import parse_storage_options

            value = parse_storage_options(value or []) or None
        values[option.name] = value
    return values
