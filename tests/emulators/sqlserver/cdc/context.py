"""What the engine hands the sys.sp_cdc_* procedures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .capture import CaptureJobs


def _everyone(role: str | None) -> bool:
    return True


@dataclass
class CdcContext:
    """One procedure call.

    ``conn``: the psycopg2 connection of the backing database, inside the caller's transaction
    (the procedure neither commits nor rolls back; what it does is undone if the caller rolls back).
    ``database``: the SQL Server database name as the server spells it (PostgreSQL name: lowercased).
    ``jobs``: the server-wide capture jobs. ``login``: the caller's login name.
    ``is_sysadmin`` / ``is_db_owner``: the caller's rights (enable/disable need them; 22902/22904).
    ``can_access_role``: whether the caller may read change data gated by a role (``None`` = no
    gating role); sp_cdc_help_change_data_capture lists only the instances it allows.
    """

    conn: Any
    database: str
    jobs: CaptureJobs
    login: str = "sa"
    is_sysadmin: bool = True
    is_db_owner: bool = True
    can_access_role: Callable[[str | None], bool] = field(default=_everyone)
    # whether the caller may SELECT the source table (schema, name): also gates the help listing
    can_read_source: Callable[[str, str], bool] = field(default=lambda schema, name: True)

    @property
    def pg_database(self) -> str:
        return self.database.lower()
