"""Embedded services for tests and ``headwater demo``: throwaway PostgreSQL clusters."""

from headwater.embedded.postgres import (
    PostgresNotFoundError,
    ThrowawayPostgres,
    ThrowawayPostgresError,
    drop_replication_slot,
    find_pg_bin,
    free_port,
)

__all__ = [
    "PostgresNotFoundError",
    "ThrowawayPostgres",
    "ThrowawayPostgresError",
    "drop_replication_slot",
    "find_pg_bin",
    "free_port",
]
