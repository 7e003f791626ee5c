"""One decode step of a megakernel variant, five times, for ncu (built with -lineinfo).

    ncu --section SourceCounters -k regex:megakernel_decode --launch-skip 4 --launch-count 1 \\
        -o report python3 tools/profile_megakernel_step.py dataflow 1
"""
import sys
import cupy
from kernels.megakernel.config import QWEN3_0_6B
from kernels.megakernel.family import MAX_SEQ
from kernels.megakernel.launch import Megakernel
from kernels.megakernel.reference import make_weights, random_kv_cache
variant, position = sys.argv[1], int(sys.argv[2])
mk = Megakernel(QWEN3_0_6B, make_weights(QWEN3_0_6B, 0), max_seq=MAX_SEQ, options=("-lineinfo",))
mk.set_kv_cache(*random_kv_cache(QWEN3_0_6B, MAX_SEQ, 1))
launch = mk.launcher(variant, 1234, position)
for _ in range(5):
    launch()
cupy.cuda.Device().synchronize()
print("done")
