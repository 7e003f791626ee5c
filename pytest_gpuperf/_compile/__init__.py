"""The compile-time tier and CUDA builds: run-time modules through CuPy (``modules``), static
nvcc builds into a shared library (``nvcc``) and host C++ libraries (``host``), both in the
on-disk build cache (``cache``); what the tier builds (``cuda_module``), building and
disassembling a module (``cubin``), reading ptxas and cuobjdump (``kernel_report``) and judging a
build against its budgets and facts (``static``)."""
