"""Checks that hold for every kernel family (no GPU needed)."""
