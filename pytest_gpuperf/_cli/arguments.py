"""What the subcommands share about their arguments: the error for arguments that do not fit
together, and argument types that validate like the plugin's options."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from pytest_gpuperf._plugin.options import BY_NAME


class CommandLineError(Exception):
    """Arguments that do not fit together; ``main`` reports it as argparse's usage error (exit 2)."""


def setting_type(name: str) -> Callable[[str], float]:
    """An argparse type that validates like the plugin's option of that name."""
    setting = BY_NAME[name]

    def parse(text: str) -> float:
        try:
            value: float = setting.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    parse.__name__ = name  # argparse names the type in its message
    return parse


if TYPE_CHECKING:
    # What add_subparsers() returns; argparse does not name the type.
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
