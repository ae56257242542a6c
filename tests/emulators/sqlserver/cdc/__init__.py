"""Change data capture of the SQL Server emulator (DESIGN.md, "CDC").

The engine routes ``EXEC sys.sp_cdc_*`` to :data:`procedures.PROCEDURES` with a
:class:`context.CdcContext`, substitutes :func:`queries.all_changes_sql` for
``cdc.fn_cdc_get_all_changes_<ci>(…)``, types the scalar functions with
:data:`queries.FUNCTION_TYPES`, and owns one :class:`capture.CaptureJobs` per server.
"""

from .capture import CaptureJobs
from .context import CdcContext
from .objects import install_system_objects
from .procedures import PROCEDURES, bind
from .queries import FUNCTION_TYPES, all_changes_sql, all_changes_sql_for

__all__ = ["FUNCTION_TYPES", "PROCEDURES", "CaptureJobs", "CdcContext", "all_changes_sql", "all_changes_sql_for",
           "bind", "install_system_objects"]
