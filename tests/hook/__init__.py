"""The hook as Metacontroller and an operator meet it: the HTTP shell, the CLI, the saved
requests and their answers (``tests/fixtures/``, fed back through the simulated
Metacontroller to a fixpoint), metrics, the version, the benchmark's own checks.
"""
