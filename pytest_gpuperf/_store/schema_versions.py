"""Which schema versions this pytest-gpuperf writes and reads, and the steps between them.

Every file pytest-gpuperf writes names its kind and version (``"schema": "pytest-gpuperf/<kind>/<n>"``).
The version this pytest-gpuperf writes is the one of its writer (``CURRENT``). ``MIGRATIONS[kind][n]``
turns a version ``n`` document into a version ``n + 1`` one, so a document of any older version is
brought up to date by applying the steps in order (:func:`migrate_document`); ``gpuperf migrate``
(:mod:`pytest_gpuperf._store.migrate`) does that to files in place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_gpuperf._store.jsonio import shown
from pytest_gpuperf.errors import GpuPerfError

# The schema each writer writes. Defined here, not beside the writers, so a reader of the version
# table (the JSON report's writer, every command) loads none of them.
REPORT_SCHEMA = "pytest-gpuperf/report/1"  # the JSON report (_report/summary.py writes it, reports.py reads it)
BASELINES_SCHEMA = "pytest-gpuperf/baselines/1"  # baselines.py
BUDGET_SCHEMA = "pytest-gpuperf/static-budgets/2"  # budgets.py

__all__ = [
    "BASELINES_SCHEMA",
    "BUDGET_SCHEMA",
    "CURRENT",
    "MIGRATIONS",
    "PREFIX",
    "REPORT_SCHEMA",
    "MigrationError",
    "migrate_document",
    "parse_schema",
    "readable",
]

Migration = Callable[[dict[str, Any]], dict[str, Any]]
PREFIX = "pytest-gpuperf/"


class MigrationError(GpuPerfError):
    """A file cannot be migrated: not ours, unreadable, of an unknown version, or invalid after migration."""


def version_of(schema: str) -> int:
    """``'pytest-gpuperf/baselines/1'`` -> 1."""
    return int(schema.rsplit("/", 1)[1])


CURRENT: dict[str, int] = {
    "report": version_of(REPORT_SCHEMA),
    "baselines": version_of(BASELINES_SCHEMA),
    "static-budgets": version_of(BUDGET_SCHEMA),
}

# kind -> {version n: the step from n to n + 1}. Register a step with @migration(kind, n) when
# a writer's schema version is bumped; tests/plugin/test_schemas.py checks every older version
# the readers accept has a chain to the current one.
MIGRATIONS: dict[str, dict[int, Migration]] = {kind: {} for kind in CURRENT}


def migration(kind: str, from_version: int) -> Callable[[Migration], Migration]:
    """Register ``function`` as the step of ``kind`` from ``from_version`` to ``from_version + 1``."""

    def register(function: Migration) -> Migration:
        MIGRATIONS[kind][from_version] = function
        return function

    return register


@migration("static-budgets", 1)
def _budgets_add_instruction_counts(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 added the optional ``sass_instructions`` of a kernel's budget; a version 1 file
    is a version 2 file without them, so only the label changes (no count is invented: a module
    that gates its code size records them at its next --gpu-perf-update-baselines)."""
    return {**data, "schema": f"{PREFIX}static-budgets/2"}


def steps(kind: str, version: int) -> list[int]:
    """The versions to step from to bring ``kind`` at ``version`` to ``CURRENT[kind]``; raises
    MigrationError for a newer version or a missing step."""
    current = CURRENT[kind]
    if version > current:
        raise MigrationError(
            f"{kind} version {version} is newer than this pytest-gpuperf writes ({current}); "
            "upgrade pytest-gpuperf to read it"
        )
    missing = [n for n in range(version, current) if n not in MIGRATIONS[kind]]
    if missing:
        raise MigrationError(
            f"{kind} version {version} cannot be migrated: no step from version {missing[0]} to {missing[0] + 1} "
            f"(this pytest-gpuperf migrates {kind} files from versions {sorted(readable(kind))})"
        )
    return list(range(version, current))


def readable(kind: str) -> set[int]:
    """The versions of ``kind`` that ``gpuperf migrate`` brings to the current one (the current included)."""
    found = {CURRENT[kind]}
    n = CURRENT[kind] - 1
    while n in MIGRATIONS[kind]:
        found.add(n)
        n -= 1
    return found


def parse_schema(data: Any) -> tuple[str, int] | None:
    """(kind, version) of a pytest-gpuperf document, or None when it is not one of ours."""
    schema = data.get("schema") if isinstance(data, dict) else None
    if not isinstance(schema, str) or not schema.startswith(PREFIX) or schema.count("/") != 2:
        return None
    kind, number = schema.split("/")[1:]
    if kind not in CURRENT:
        return None
    try:
        version = int(number)
    except ValueError:
        raise MigrationError(f"field 'schema' {shown(schema)} does not end in a version number") from None
    return kind, version


def migrate_document(data: dict[str, Any], kind: str, version: int) -> dict[str, Any]:
    """``data`` (``kind`` at ``version``) brought to the current version."""
    for n in steps(kind, version):
        data = MIGRATIONS[kind][n](data)
        if parse_schema(data) != (kind, n + 1):
            raise MigrationError(
                f"the {kind} step from version {n} wrote schema {shown(data.get('schema'))}, not version {n + 1}"
            )
    return data
