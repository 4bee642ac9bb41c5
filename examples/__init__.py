"""Example task functions for tickwork's ``python`` handler (``examples.backup:...``).

Importable as ``examples`` when the repository root is on ``sys.path`` (see
``examples/tickwork.toml``).
"""
