"""Which stored entries belong to tests that no longer exist (``gpuperf prune`` removes them).

An entry is stored under ``<test id>::<variant>``, where the test id is the node id without
its module (``TestX::test_y[a::b]`` may itself hold ``::``) and the variant name may hold
``::`` too. So a key is never split blindly: it is live when some collected test id of its
module is a prefix of it followed by ``::``.

A file whose module had no test collected is left alone unless asked (``remove_uncollected``):
collection from the wrong folder, a module skipped at import (``pytest.importorskip``) or one
that failed to collect looks exactly like a deleted module, and would lose every entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from pytest_gpuperf._store.baselines import BaselineFile, module_file_name
from pytest_gpuperf.errors import GpuPerfError


def is_live(key: str, tests: set[str]) -> bool:
    """Whether ``key`` (``<test id>::<variant>``) belongs to one of ``tests`` (test ids)."""
    start = 0
    while (cut := key.find("::", start)) != -1:
        if key[:cut] in tests:
            return True
        start = cut + 1
    return False


@dataclass
class Plan:
    """What a prune removes, and what it leaves alone for want of a collected test of the module."""

    stale: dict[str, list[str]] = field(default_factory=dict)  # file -> keys whose test no longer exists
    uncollected: dict[str, int] = field(default_factory=dict)  # file -> its entries; no test of its module collected


def plan_prune(
    files: Mapping[str, BaselineFile],
    node_ids: Iterable[str],
    *,
    whole_suite: bool,
    remove_uncollected: bool = False,
) -> Plan:
    """The entries of ``files`` (``'<device key>/<module>.json'`` -> file) whose test no longer exists.

    An entry ``test[params]::variant`` in ``<device>/<module>.json`` is kept when the node id
    ``<module path>::test[params]`` was collected. A file of a module that nothing was collected
    from is never pruned when only part of the suite was collected (``whole_suite`` False: after
    ``--keep-tests-from tests/qkv`` the other families' files are out of scope); when the whole
    suite was, it is listed in ``uncollected`` and left alone unless ``remove_uncollected``. When
    that is every file with entries, the collection was not of this suite: GpuPerfError, nothing
    is pruned.
    """
    tests: dict[str, set[str]] = {}
    for nid in node_ids:
        module, _, test = nid.partition("::")
        tests.setdefault(module_file_name(module), set()).add(test)
    plan = Plan()
    for name, f in sorted(files.items()):
        known = tests.get(PurePosixPath(name).name)
        if known is None:
            if not whole_suite or not f.entries:
                continue
            if not remove_uncollected:
                plan.uncollected[name] = len(f.entries)
                continue
        gone = [k for k in sorted(f.entries) if not is_live(k, known or set())]
        if gone:
            plan.stale[name] = gone
    if plan.uncollected and len(plan.uncollected) == sum(1 for f in files.values() if f.entries):
        raise GpuPerfError(
            f"no test of the modules of any of the {len(plan.uncollected)} baseline file(s) was collected (run "
            "gpuperf prune from the project root, where the test modules import, or give the node ids with "
            "--node-ids); nothing was pruned. "
            "To remove them all, pass --remove-uncollected"
        )
    return plan
