"""Fuzzing the scaleright CLI: generated inputs (``strategies``) and an in-process runner that classifies how each
one ended (``harness``). Used by ``tests/test_fuzz.py`` (a bounded run) and ``benchmarks/fuzz.py`` (a long one)."""
