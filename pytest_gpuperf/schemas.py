"""JSON Schemas of the files pytest-gpuperf writes (reports, baselines, static budgets), for
editors, dashboards and readers in other languages. ``docs/schemas.md`` describes them."""

from __future__ import annotations

from pytest_gpuperf._store.schemas import KINDS, load_schema, schema_errors, schema_text

__all__ = ["KINDS", "load_schema", "schema_errors", "schema_text"]
