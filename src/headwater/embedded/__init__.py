"""Embedded services for tests and ``headwater demo``: throwaway PostgreSQL clusters."""

from headwater.embedded.postgres import (
    PostgresNotFoundError,
    ThrowawayPostgres,
    ThrowawayPostgresError,
    drop_replication_slot,
    find_pg_bin,
    free_port,
    wait_for_slot_active,
    wal_lsn_after,
)

__all__ = [
    "PostgresNotFoundError",
    "ThrowawayPostgres",
    "ThrowawayPostgresError",
    "drop_replication_slot",
    "find_pg_bin",
    "free_port",
    "wait_for_slot_active",
    "wal_lsn_after",
]
