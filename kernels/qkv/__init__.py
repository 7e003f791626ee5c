"""QKV projection kernels (LSU hw01): qkv_base, qkv_base_w2, qkv_strip, qkv_strip_w2."""
