"""kernels.megakernel.ab with one more kind of build: ``--set NAME=MK_SOURCE_OLD=1`` compiles the
megakernel source in build/old/ (a copy of an earlier commit's megakernel.cu and mk_device.cuh, put
there by the run script) instead of the working tree's, so that a change that only moves code (the
same arithmetic, another instruction schedule) can be timed interleaved against the code it replaced.
The ab workers prebuild it from the working tree's source (the define unused there); this process
then compiles the old source itself."""
import sys
from pathlib import Path

import pytest_gpuperf.compile as compile_api

OLD_SOURCE = Path(__file__).resolve().parents[2] / "build" / "old" / "megakernel.cu"
_load_module = compile_api.load_module


def load_module(source, *, options=(), **kwargs):
    if "-DMK_SOURCE_OLD=1" in options and Path(source).name == "megakernel.cu":
        source = OLD_SOURCE
    return _load_module(source, options=options, **kwargs)


compile_api.load_module = load_module

if __name__ == "__main__":
    from kernels.megakernel import ab

    sys.exit(ab.main())
