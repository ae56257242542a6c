"""TDS 7.4 wire layer of the SQL Server emulator.

The protocol modules (``packets``, ``prelogin``, ``login7``, ``typeinfo``, ``tokens``, ``requests``,
``render``) do no I/O: they turn bytes into requests and results into bytes. ``server`` is the thin
socket layer on top, calling only the duck-typed Engine API described in ../DESIGN.md.
"""

from .server import TdsServer

__all__ = ["TdsServer"]
