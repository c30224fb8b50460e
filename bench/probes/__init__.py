"""One-question measurements beside the benchmark: each module answers one question that a
design or tuning decision rests on, and its docstring names the docs section that records the
answer and how to run it (``python -m bench.probes.NAME``). None of them is part of
``python -m bench.run``; bench/README.md, "The probes", lists them."""
