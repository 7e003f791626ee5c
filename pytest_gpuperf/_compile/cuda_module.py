"""What the compile-time tier builds: :class:`CudaModule`, one CUDA source as the tests compile
it and the SASS facts its optimisations depend on."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_gpuperf._compile import nvcc as _nvcc

__all__ = ["INSTALL_HINT", "CudaModule", "ToolchainMissing", "arch_selected"]

INSTALL_HINT = (
    "install the compile extra: pip install 'pytest-gpuperf[compile]' (NVIDIA's nvcc, nvvm, "
    "CCCL, cuobjdump and nvdisasm wheels), or set CUDA_HOME to a CUDA toolkit"
)


class ToolchainMissing(RuntimeError):
    """A tool the tier needs (nvcc, cuobjdump, nvdisasm, a demangler, CUTLASS headers) is missing."""


def arch_selected(arch: str, selection: Iterable[str]) -> bool:
    """``sm_90a`` is selected by ``sm_90a`` or by ``sm_90``; ``all`` selects everything."""
    chosen = set(selection)
    return "all" in chosen or arch in chosen or re.sub(r"[af]$", "", arch) in chosen


@dataclasses.dataclass(frozen=True)
class CudaModule:
    """One CUDA source as the tests compile it, and the facts its optimisations depend on.

    ``options`` and ``name_expressions`` are the very ones given to ``load_module`` (NVRTC);
    ``defines`` (``"NAME"`` or ``"NAME=VALUE"``) are appended as ``-D`` flags. ``sass_facts``
    maps a kernel-name pattern (a substring of the demangled name; ``*`` and ``?`` wildcards
    allowed) to regular expressions that must each occur in the SASS of every matching kernel;
    ``sass_facts_by_arch`` adds facts for one architecture (``"sm_90"`` also covers ``sm_90a``).
    ``max_code_growth`` (a fraction, e.g. 0.02) holds each kernel's SASS instruction count within
    that much of the count recorded with its budget; ``None`` leaves code size unchecked.
    ``shared_library=True`` builds the source with nvcc's host compiler as
    :func:`~pytest_gpuperf._compile.nvcc.build_shared_library` does (``options`` are its
    ``flags``; name expressions are not used). ``include_dirs_from`` names a function
    ``"package.module:function"`` returning more include folders, called at build time (for
    headers found at run time, such as CUTLASS's). Budgets are stored in ``<group or name>.json``.
    """

    name: str
    source: Path
    options: tuple[str, ...] = ()
    name_expressions: tuple[str, ...] = ()
    archs: tuple[str, ...] = ("sm_80", "sm_90")
    include_dirs: tuple[Path, ...] = ()
    defines: tuple[str, ...] = ()
    sass_facts: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict, hash=False)
    sass_facts_by_arch: Mapping[str, Mapping[str, tuple[str, ...]]] = dataclasses.field(
        default_factory=dict, hash=False
    )
    group: str | None = None
    shared_library: bool = False
    include_dirs_from: str | None = None
    library_name: str | None = None  # file name of a shared library (default: the source's stem)
    max_code_growth: float | None = None

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        set_("source", Path(self.source))
        set_("options", tuple(self.options))
        set_("name_expressions", tuple(self.name_expressions))
        set_("archs", tuple(self.archs))
        set_("include_dirs", tuple(Path(p) for p in self.include_dirs))
        set_("defines", tuple(self.defines))
        set_("sass_facts", self._checked_facts(self.sass_facts, "sass_facts"))
        by_arch = {}
        for arch, facts in dict(self.sass_facts_by_arch).items():
            _nvcc._gencode(arch)
            by_arch[arch] = self._checked_facts(facts, f"sass_facts_by_arch[{arch!r}]")
        set_("sass_facts_by_arch", MappingProxyType(by_arch))
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.budget_file):
            raise ValueError(
                f"CudaModule {self.name!r}: group/name must be a file-name-safe word, got {self.budget_file!r}"
            )
        for arch in self.archs:
            _nvcc._gencode(arch)  # raises ValueError on a malformed arch
        if self.max_code_growth is not None and not 0 <= self.max_code_growth < 1:
            raise ValueError(
                f"CudaModule {self.name!r}: max_code_growth is a fraction in [0, 1), got {self.max_code_growth!r}"
            )
        if self.shared_library and self.name_expressions:
            raise ValueError(
                f"CudaModule {self.name!r}: a shared library instantiates its own templates; drop name_expressions"
            )

    def _checked_facts(self, raw: Mapping[str, Any], where: str) -> Mapping[str, tuple[str, ...]]:
        facts = {str(k): (v,) if isinstance(v, str) else tuple(v) for k, v in dict(raw).items()}
        for pattern, regexes in facts.items():
            for regex in regexes:
                try:
                    re.compile(regex)
                except re.error as exc:
                    raise ValueError(
                        f"CudaModule {self.name!r}: {where}[{pattern!r}]: bad regex {regex!r}: {exc}"
                    ) from None
        return MappingProxyType(facts)

    def facts_for(self, arch: str) -> dict[str, tuple[str, ...]]:
        """The SASS facts that must hold on ``arch``: the common ones and that arch's own."""
        facts = {k: tuple(v) for k, v in self.sass_facts.items()}
        for selector, extra in self.sass_facts_by_arch.items():
            if arch_selected(arch, (selector,)):
                for pattern, regexes in extra.items():
                    facts[pattern] = (*facts.get(pattern, ()), *regexes)
        return facts

    @property
    def gates_code_size(self) -> bool:
        return self.max_code_growth is not None

    @property
    def budget_file(self) -> str:
        return self.group or self.name

    def all_include_dirs(self) -> tuple[Path, ...]:
        """``include_dirs`` plus those ``include_dirs_from`` returns (raises ToolchainMissing)."""
        extra: tuple[Path, ...] = ()
        if self.include_dirs_from:
            module_name, _, func_name = self.include_dirs_from.partition(":")
            try:
                func = getattr(importlib.import_module(module_name), func_name)
                extra = tuple(Path(p) for p in func())
            except (ImportError, AttributeError, OSError, RuntimeError) as exc:
                raise ToolchainMissing(f"include folders of {self.name} ({self.include_dirs_from}): {exc}") from exc
        return (*self.include_dirs, *extra)

    def flags(self) -> tuple[str, ...]:
        return (*self.options, *(f"-D{d}" for d in self.defines))

    def wrapper_source(self) -> str:
        """The generated translation unit: the source, and every name expression instantiated.
        The source is included by name (found through ``-I`` its folder), so the text, and the
        cache key, do not depend on where the checkout lives."""
        lines = [
            "// Generated by pytest-gpuperf: instantiates the module's NVRTC name expressions.",
            f'#include "{self.source.name}"',
        ]
        if self.name_expressions:
            lines.append("__attribute__((unused)) static void* const gpuperf_instantiations[] = {")
            lines += [f"    (void*)&{expr}," for expr in self.name_expressions]
            lines.append("};")
        return "\n".join(lines) + "\n"
