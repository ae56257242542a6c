"""SQL Server's CDC errors: numbers, severities and texts as ``sys.messages`` has them."""

from __future__ import annotations

from ..results import SqlServerError

# fn_cdc_get_all_changes_<ci> with a NULL bound, a bound outside the instance's validity interval,
# from > to or an unknown row filter option: SQL Server answers with this (misleading) message,
# state 3, and names the function with " ... ." instead of the capture instance.
ALL_CHANGES_313 = ("An insufficient number of arguments were supplied for the procedure or function "
                   "cdc.fn_cdc_get_all_changes_ ... .")
MAP_TIME_TO_LSN_313 = ("An insufficient number of arguments were supplied for the procedure or function "
                       "sys.fn_cdc_map_time_to_lsn.")
STATE_313 = 3


def error(number: int, text: str, *, severity: int = 16, state: int = 1, procedure: str = "") -> SqlServerError:
    return SqlServerError(number, text, severity=severity, state=state, procedure=procedure)


def db_not_enabled(database: str, procedure: str = "") -> SqlServerError:
    return error(22901, f"The database '{database}' is not enabled for Change Data Capture. Ensure that the "
                 "correct database context is set and retry the operation. To report on the databases enabled "
                 "for Change Data Capture, query the is_cdc_enabled column in the sys.databases catalog view.",
                 procedure=procedure)


def not_authorized(what: str, procedure: str = "") -> SqlServerError:
    return error(22902, f"Caller is not authorized to initiate the requested action. {what} privileges are "
                 "required.", procedure=procedure)


def not_dbo(procedure: str = "") -> SqlServerError:
    return error(22904, "Caller is not authorized to initiate the requested action. DBO privileges are required.",
                 procedure=procedure)


def already_enabled_text(database: str) -> str:
    return (f"Database '{database}' is already enabled for Change Data Capture. Ensure that the correct database "
            "context is set, and retry the operation. To report on the databases enabled for Change Data "
            "Capture, query the is_cdc_enabled column in the sys.databases catalog view.")


def cdc_schema_exists(database: str) -> SqlServerError:
    return error(22906, f"The database '{database}' cannot be enabled for Change Data Capture because a database "
                 "user named 'cdc' or a schema named 'cdc' already exists in the current database. These objects "
                 "are required exclusively by Change Data Capture. Drop or rename the user or schema and retry "
                 "the operation.")


def role_name_empty() -> SqlServerError:
    return error(22907, "Parameter @role_name cannot be empty. Specify a value for @role_name and retry the "
                 "operation. Supply null as the value if no role is to be used to gate access to captured "
                 "change data.")


def cleanup_not_enabled(database: str) -> SqlServerError:
    return error(22910, f"The cleanup request for database '{database}' failed. The database is not enabled for "
                 "Change Data Capture.")


def instance_exists(name: str) -> SqlServerError:
    return error(22926, f"Could not create a capture instance because the capture instance name '{name}' already "
                 "exists in the current database. Specify an explicit unique name for the parameter "
                 "@capture_instance.")


def instance_name_too_long(name: str) -> SqlServerError:
    return error(22927, f"Capture instance name '{name}' exceeds the length limit of 100 characters. Specify a "
                 "name that satisfies the length constraint.")


def index_not_found(index: str, schema: str, table: str) -> SqlServerError:
    return error(22928, f"Index name '{index}' is not an index for table '{schema}.{table}'. Specify a valid "
                 "index name for the table.")


def index_not_unique(index: str, schema: str, table: str) -> SqlServerError:
    return error(22929, f"Index '{index}' must be either a primary key or a unique index for table "
                 f"'{schema}.{table}'. Specify an index that meets at least one of these requirements.")


def column_not_found(column: str, schema: str, table: str) -> SqlServerError:
    return error(22930, f"Could not locate '{column}' as a column of source table '{schema}.{table}'. Specify a "
                 "valid column name.")


def source_not_found(schema: str, table: str) -> SqlServerError:
    return error(22931, f"Source table '{schema}.{table}' does not exist in the current database. Ensure that the "
                 "correct database context is set. Specify a valid schema and table name for the database.")


def instance_name_invalid(name: str) -> SqlServerError:
    return error(22932, f"Capture instance name '{name}' is invalid. Specify a valid name. See the topic "
                 "'Identifiers' in SQL Server Books Online for object name rules.")


def net_changes_without_key() -> SqlServerError:
    return error(22939, "The parameter @supports_net_changes is set to 1, but the source table does not have a "
                 "primary key defined and no alternate unique index has been specified.")


def key_not_captured() -> SqlServerError:
    return error(22943, "Columns used to uniquely identify a row for net change tracking must be included in the "
                 "list of captured columns. Add either the primary key columns of the source table, or the "
                 "columns defined for the index specified in the parameter @index_name to the list of captured "
                 "columns and retry the operation.")


def low_water_mark_outside(lsn: str, instance: str, low: str, high: str) -> SqlServerError:
    return error(22957, f"LSN {lsn}, specified as the new low end point for the change table associated with "
                 f"capture instance '{instance}', is not within the Change Data Capture timeline [{low}, {high}].")


def instance_not_enabled(instance: str, schema: str, table: str) -> SqlServerError:
    return error(22960, f"Change data capture instance '{instance}' has not been enabled for the source table "
                 f"'{schema}.{table}'. Use sys.sp_cdc_help_change_data_capture to verify the capture instance "
                 "name and retry the operation.")


def two_instances(schema: str, table: str) -> SqlServerError:
    return error(22962, f"Two capture instances already exist for source table '{schema}.{table}'. A table can "
                 "have at most two capture instances. If the current tracking options are not appropriate, "
                 "disable change tracking for the obsolete instance by using sys.sp_cdc_disable_table and retry "
                 "the operation.")


def parameter_null(name: str) -> SqlServerError:
    return error(22963, f"Parameter '{name}' cannot be null or empty. Specify a value for the named parameter and "
                 "retry the operation.")


def low_water_mark_not_mapped(lsn: str) -> SqlServerError:
    return error(22964, f"LSN {lsn}, specified as the new low end point for change table cleanup must represent "
                 "the start_lsn value of a current entry in the cdc.lsn_time_mapping table. Choose an LSN value "
                 "that satisfies this requirement.")


def help_needs_both() -> SqlServerError:
    return error(22972, "When calling stored procedure [sys].sp_cdc_help_change_data capture, if either "
                 "@source_schema or @source_name is non-null and non-empty, the other parameter must also be "
                 "non-null and non-empty.")


def cdc_schema_table() -> SqlServerError:
    return error(22974, "Tables contained in the cdc schema cannot be enabled for Change Data Capture.")


def reserved_column(table: str) -> SqlServerError:
    return error(22975, f"Source table '{table}' contains one of the following reserved column names: "
                 "__$start_lsn, __$end_lsn, __$seqval, __$operation, and __$update_mask. To enable Change Data "
                 "Capture for this table, specify a captured column list and ensure that these columns are "
                 "excluded from the list.")


def table_not_tracked(schema: str, table: str) -> SqlServerError:
    return error(22985, f"Change data capture has not been enabled for source table '{schema}.{table}'. Specify "
                 "the name of a table enabled for Change Data Capture. To report on the tables enabled for Change "
                 "Data Capture, query the is_tracked_by_cdc column in the sys.tables catalog view.")


def system_database(database: str) -> SqlServerError:
    return error(22989, f"Could not enable Change Data Capture for database '{database}'. Change data capture is "
                 "not supported on system databases, or on a distribution database.")


def bad_polling_interval() -> SqlServerError:
    return error(22990, "The value specified for the parameter @pollinginterval must be greater than or equal to 0 "
                 "and less than 24 hours(Max: 86399 seconds). Specify a polling interval (in seconds) that is "
                 "less than 24 hours (86,400 seconds).")


def bad_maxtrans() -> SqlServerError:
    return error(22991, "The value specified for the parameter @maxtrans must be greater than 0.")


def bad_job_type(job_type: object) -> SqlServerError:
    return error(22992, f"The specified @job_type, {job_type}, is not supported. The value specified for the "
                 "parameter @job_type must be N'capture' to indicate a capture job, or N'cleanup' to indicate a "
                 "cleanup job.")


def bad_retention() -> SqlServerError:
    return error(22994, "The retention value specified for the Change Data Capture cleanup process must be greater "
                 "than 0 and less than or equal to 52594800. When creating or modifying the cleanup job, specify "
                 "a retention value (in minutes) that is within that range. If this error is encountered when "
                 "executing the sys.sp_cdc_cleanup_change_table stored procedure, reset the retention value "
                 "associated with the job to a non-negative value less than 52594800 by using the "
                 "sp_cdc_change_job stored procedure.")


def retention_for_capture() -> SqlServerError:
    return error(22995, "A value for the parameter @retention cannot be specified when the job type is 'capture'. "
                 "Specify NULL for the parameter, or omit the parameter from the statement.")


def capture_params_for_cleanup() -> SqlServerError:
    return error(22996, "When adding or modifying the CDC cleanup job, @pollinginterval, @maxtrans, @maxscans, "
                 "and @continuous may not be assigned non-null values.")


def job_missing(job_type: str) -> SqlServerError:
    return error(22997, f"The Change Data Capture '{job_type}' job does not exist in the system table "
                 "'msdb.dbo.cdc_jobs'. Use the stored procedure 'sys.sp_cdc_add_job' to add the Change Data "
                 "Capture job.")


def bad_continuous() -> SqlServerError:
    return error(22998, "The value specified for the parameter @continuous must be 0 or 1.")


def bad_maxscans() -> SqlServerError:
    return error(22970, "The value for parameter @maxscans specified for the Change Data Capture job must be "
                 "greater than 0.")


def missing_parameter(procedure: str, parameter: str) -> SqlServerError:
    return error(201, f"Procedure or function '{procedure}' expects parameter '@{parameter}', which was not "
                 "supplied.", state=4, procedure=procedure)


def unknown_parameter(procedure: str, parameter: str) -> SqlServerError:
    return error(8145, f"@{parameter} is not a parameter for procedure {procedure}.", state=2, procedure=procedure)


def too_many_arguments(procedure: str) -> SqlServerError:
    return error(8144, f"Procedure or function {procedure} has too many arguments specified.", state=2,
                 procedure=procedure)
