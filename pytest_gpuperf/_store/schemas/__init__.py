"""JSON Schemas (draft 2020-12) of the three kinds of file pytest-gpuperf writes.

    report.schema.json          pytest --gpu-perf --gpu-perf-json FILE   (pytest-gpuperf/report/1)
    baselines.schema.json       baselines/<device key>/<module>.json    (pytest-gpuperf/baselines/1)
    static-budgets.schema.json  baselines/static/<file>.json            (pytest-gpuperf/static-budgets/1 and /2)

They describe the files for other tools (editors, dashboards, another language's reader); the
plugin itself reads through its own validating readers, which name the file and the field of a
bad value. ``docs/schemas.md`` says which versions are read and how ``gpuperf migrate``
rewrites older ones. Validating needs the ``jsonschema`` package (the ``test`` extra).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

KINDS = ("report", "baselines", "static-budgets")


def schema_text(kind: str) -> str:
    """The schema of ``kind`` (one of ``KINDS``) as shipped in the package."""
    if kind not in KINDS:
        raise ValueError(f"no schema for {kind!r}; the kinds are {', '.join(KINDS)}")
    return resources.files(__name__).joinpath(f"{kind}.schema.json").read_text(encoding="utf-8")


def load_schema(kind: str) -> dict[str, Any]:
    """The parsed schema of ``kind``."""
    schema: dict[str, Any] = json.loads(schema_text(kind))
    return schema


def schema_errors(data: Any, kind: str) -> list[str]:
    """Every violation of ``kind``'s schema in ``data``, one line each (``where: message``);
    empty when valid. Raises ImportError, saying what to install, without ``jsonschema``."""
    try:
        from jsonschema import Draft202012Validator
    except ImportError as exc:
        raise ImportError(
            f"validating against the JSON Schemas needs jsonschema ({exc}); pip install jsonschema"
        ) from None
    validator = Draft202012Validator(load_schema(kind))
    found = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{_where(e.absolute_path)}: {e.message[:300]}" for e in found]


def _where(path: Any) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<top level>"
