"""``--gpu-perf-changed-only``: a perf test proven to time the same GPU work as at
``--gpu-perf-against``'s revision is not timed, and passes.

The decision is per test, taken at its first ``measure`` or ``assert_speedup``, and the test is
proven the same as at REV only when all of these hold:

- the plugin's own files (the ``pytest_gpuperf`` folder) are the same at REV as the running
  plugin's, where REV's tree holds the plugin (a change to the plugin times everything);
- the test module's file is the same at REV;
- the test, run with a stand-in for ``gpu_perf`` on each side (as ``--gpu-perf-against`` builds
  REV's variants), runs to its end on both sides (the stand-in's results are placeholders, so a
  test that computes with them and stops early has later calls nobody saw) and makes the same
  calls in the same order: the same variants measured, the same claims with the same required
  speedup;
- every variant it builds declares the same bytes, FLOPs, cache mode, reference and number of
  rotations as its REV namesake, and each of its launches is proven the same GPU work as the
  namesake's (``launch_identity.compare``: the same code, launch configuration and parameter
  bytes, read from graphs captured on the GPU).

A test so proven ends at that first call, as passed; each of its variants' records says
``identical to REV``, how many kernels, and how their code was proven the same. The rest of
the test's body (assertions on the numbers, ``gpu_perf.record``) does not run. Otherwise the
test is timed as usual and each record says why (the first difference found).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpuperf._timing.launch_identity import SAME_FUNCTION, LaunchIdentity, Proof, compare

if TYPE_CHECKING:  # the plugin imports this module on load (IdenticalToRev): keep it light
    from pytest_gpuperf._timing.results import Variant

__all__ = ["IdenticalToRev", "Identical", "decide", "plugin_changed"]

VARIANT_FIELDS = ("bytes", "flops", "cache", "reference")


class IdenticalToRev(BaseException):
    """Ends a test proven the same as at REV; the run counts it as passed. A BaseException, as
    pytest's own outcomes are, so a test's ``except Exception`` does not swallow it."""


@dataclass(frozen=True)
class Identical:
    """A test proven the same as at REV: each variant's proof."""

    label: str  # REV as the user gave it
    commit: str
    proofs: Mapping[str, Proof]

    def note(self, variant: str) -> str:
        """``identical to REV (its commit, shortened): N kernels, same code (how) and launch configuration, same inputs``."""
        proof = self.proofs[variant]
        rev = f"{self.label} ({self.commit[:7]})" if self.commit else self.label
        kernels = f"{proof.kernels} kernel{'s' if proof.kernels != 1 else ''}"
        return (
            f"identical to {rev}: {kernels}, same code ({'; '.join(proof.bases)}) and launch configuration, same inputs"
        )

    def to_json(self, variant: str) -> dict[str, Any]:
        proof = self.proofs[variant]
        return {"rev": self.label, "commit": self.commit or None, "kernels": proof.kernels, "basis": list(proof.bases)}


def decide(
    *,
    rev_root: Path,
    label: str,
    commit: str,
    module: str,
    rootdir: Path,
    now_calls: tuple[tuple[Any, ...], ...] | str,
    now_variants: Mapping[str, Variant],
    rev_calls: tuple[tuple[Any, ...], ...],
    rev_variants: Mapping[str, Variant],
    rev_stopped: str,
    unpaired: str,
    read: Callable[[Variant], tuple[LaunchIdentity, ...] | str] | None,
) -> Identical | str:
    """``Identical``, or why the test is timed (the module docstring states the rule). ``read``
    reads a variant's launches on the GPU (the backend's ``launch_identity``); ``now_calls`` is
    why the test's calls could not be collected where it is a string."""
    changed = plugin_changed(rev_root)
    if changed:
        return changed
    if _digest(rootdir / module) != _digest(rev_root / module):
        return f"the test module {module} differs from {label}'s"
    if isinstance(now_calls, str):
        return now_calls
    if unpaired:
        return f"not paired with {label}: {unpaired}"
    if rev_stopped:
        return f"the test stopped before its end at {label} ({rev_stopped}): its later calls there are unknown"
    if now_calls != rev_calls:
        return f"the test's calls of gpu_perf differ from {label}'s: {_first_difference(now_calls, rev_calls)}"
    if read is None:
        return "the timing backend cannot read launches"
    proofs: dict[str, Proof] = {}
    for name, now in now_variants.items():
        then = rev_variants.get(name)
        if then is None:
            return f"variant {name!r} has no namesake at {label}"
        why = _compare_variant(now, then, label, read)
        if isinstance(why, str):
            return f"variant {name!r}: {why}"
        proofs[name] = why
    if not proofs:
        return "the test builds no variant"
    return Identical(label, commit, proofs)


def _compare_variant(
    now: Variant, then: Variant, label: str, read: Callable[[Variant], tuple[LaunchIdentity, ...] | str]
) -> Proof | str:
    for field in VARIANT_FIELDS:
        if getattr(now, field) != getattr(then, field):
            return f"its {field} {getattr(now, field)!r} now, {getattr(then, field)!r} at {label}"
    if len(now.rotations) != len(then.rotations):
        return f"{len(now.rotations)} rotations now, {len(then.rotations)} at {label}"
    mine, theirs = read(now), read(then)
    if isinstance(mine, str):
        return f"its launch cannot be read now: {mine}"
    if isinstance(theirs, str):
        return f"its launch cannot be read at {label}: {theirs}"
    proofs: list[Proof] = []
    for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        proof = compare(a, b, label)
        if isinstance(proof, str):
            return proof if i == 0 else f"rotation {i}: {proof}"
        proofs.append(proof)
    bases = tuple(dict.fromkeys(basis for p in proofs for basis in p.bases)) or (SAME_FUNCTION,)
    return Proof(proofs[0].kernels, bases)


def _first_difference(now: tuple[tuple[Any, ...], ...], then: tuple[tuple[Any, ...], ...]) -> str:
    for i, (a, b) in enumerate(zip(now, then, strict=False)):
        if a != b:
            return f"call {i + 1} is {_call(a)} now, {_call(b)} there"
    return f"{len(now)} calls now, {len(then)} there"


def _call(call: tuple[Any, ...]) -> str:
    if call[0] == "speedup":
        return f"assert_speedup({call[1]!r}, {call[2]!r}, at_least={call[3]!r})"
    return f"measure({call[1]!r}{'' if call[2] else ', check_baseline=False'})"


def collect_calls(item: Any, real: Any) -> tuple[tuple[tuple[Any, ...], ...], dict[str, Variant]] | str:
    """The working tree's test run once more with a stand-in for ``gpu_perf`` (``VariantCollector``):
    its calls and variants, or why they cannot be collected."""
    from pytest_gpuperf._plugin.against import STAND_IN_STOPS, VariantCollector, stop_reason

    function = getattr(item, "obj", None)
    if (
        function is None
        or inspect.isclass(getattr(function, "__self__", None))
        or "::" in item.nodeid.split("::", 1)[-1]
    ):
        return "test methods of classes are not collected"
    collector = VariantCollector(real)
    funcargs = getattr(item, "funcargs", {})
    try:
        kwargs = {
            name: collector if name == "gpu_perf" else funcargs[name] for name in inspect.signature(function).parameters
        }
    except KeyError as exc:
        return f"the test's argument {exc} is not available to run it again"
    try:
        function(**kwargs)
    except STAND_IN_STOPS as exc:  # the stand-in's results are placeholders: a test that computes with them may stop
        return f"the test stopped before its end when run again with a stand-in ({stop_reason(exc)}): its later calls are unknown"
    return tuple(collector.calls), dict(collector.variants)


@functools.cache
def plugin_changed(rev_root: Path) -> str:
    """Why everything is timed when REV's ``pytest_gpuperf`` folder differs from the running
    plugin's files; "" when they match or REV's tree holds no plugin."""
    theirs = rev_root / "pytest_gpuperf"
    if not theirs.is_dir():
        return ""
    ours = Path(__file__).resolve().parents[1]
    if _tree(ours) != _tree(theirs):
        return "the plugin (pytest_gpuperf/) differs from the revision's, so every test is timed"
    return ""


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): _digest(p)
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    }


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""
