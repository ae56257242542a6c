"""The SQL Server connector: Debezium's events from SQL Server's change tables."""
