"""``python -m dpfast``: the command line (see :mod:`dpfast.cli`)."""

from __future__ import annotations

if __name__ == "__main__":
    from dpfast.cli import run

    run()
