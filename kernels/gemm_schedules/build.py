"""Build every GEMM configuration in parallel and report ptxas's verdict on each.

    python -m kernels.gemm_schedules.build [--jobs N] [--configs NAME ...] [--cache-dir DIR]

Needs nvcc and the CUTLASS headers, not a GPU, so the cache it fills (``$GPU_PERF_CACHE_DIR``
or ``~/.cache/pytest-gpuperf``) can be built on one machine and carried to another that has the
same toolchain and paths (the cache key holds both). Exits 1 if a build fails or ptxas reports a
performance warning (C75xx, spills): those are bugs, not noise.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import sys
import time
from typing import Sequence

from kernels.gemm_schedules.family import CONFIGS
from kernels.gemm_schedules.launch import build_config
from pytest_gpuperf import BuildResult

_REGISTERS_RE = re.compile(r"Used (\d+) registers")


def registers(result: BuildResult) -> list[int]:
    """Registers per thread of each kernel in the build, from the ptxas report."""
    return [int(r) for r in _REGISTERS_RE.findall(result.log)]


def build_all(names: Sequence[str], *, jobs: int, cache_dir: str | None = None) -> dict[str, BuildResult | Exception]:
    """Build ``names`` with up to ``jobs`` nvcc processes at once; failures are returned, not raised."""
    results: dict[str, BuildResult | Exception] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(build_config, CONFIGS[name], cache_dir=cache_dir): name for name in names}
        for future in concurrent.futures.as_completed(futures):
            name = futures[future]
            try:
                results[name] = future.result()
            except Exception as exc:  # report every config, then fail
                results[name] = exc
    return {name: results[name] for name in names}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel nvcc processes")
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--cache-dir", default=None, help="build cache (default: $GPU_PERF_CACHE_DIR or ~/.cache/pytest-gpuperf)")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    results = build_all(args.configs, jobs=args.jobs, cache_dir=args.cache_dir)
    failed = False
    for name, result in results.items():
        if isinstance(result, Exception):
            failed = True
            print(f"FAIL  {name}: {type(result).__name__}: {result}")
            continue
        origin = "cached" if result.cached else f"built in {result.build_seconds:.0f} s"
        print(f"{'WARN' if result.perf_warnings else 'OK  '}  {name}: {origin}, registers {registers(result)}, {result.library}")
        for warning in result.perf_warnings:
            failed = True
            print(f"      ptxas: {warning}")
    print(f"{len(results)} configs in {time.perf_counter() - start:.0f} s wall")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
