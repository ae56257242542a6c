"""`snapshot.mode` as a decision: whether to snapshot and whether to stream, from the mode, the
stored offset and what the database still holds. A pure function, the same for every connector and
for both drivers (the standalone runner and the Spark source).

The connector answers two questions the policy asks: what the stored offset says (nothing, a
snapshot that did not finish, or a position to resume at) and whether the database can still
serve that position (PostgreSQL: the slot exists and has not moved past it; SQL Server: the
change tables still hold it). A position that cannot be served is never skipped silently: modes
that may snapshot again do, the others stop with the connector's error saying what was lost.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Stored(enum.Enum):
    NOTHING = "nothing"                    # no stored offset: a first start
    UNFINISHED_SNAPSHOT = "unfinished"     # a snapshot started and did not complete
    POSITION = "position"                  # a completed snapshot or a streaming position


# The names Debezium accepts for the same mode (spec PG-34, MS snapshot modes).
ALIASES = {"never": "no_data", "schema_only": "no_data", "initial_schema_only": "no_data"}


@dataclass(frozen=True)
class SnapshotMode:
    """`snapshot.mode` and, for `configuration_based`, its four properties."""

    mode: str
    snapshot_data: bool = False          # snapshot.mode.configuration.based.snapshot.data
    snapshot_on_data_error: bool = False  # ...snapshot.on.data.error
    start_stream: bool = True            # ...start.stream

    @classmethod
    def from_config(cls, config: Any) -> SnapshotMode:
        mode = config.get("snapshot.mode")
        mode = ALIASES.get(mode, mode)
        if mode != "configuration_based":
            return cls(mode)
        return cls(mode, config.get("snapshot.mode.configuration.based.snapshot.data"),
                   config.get("snapshot.mode.configuration.based.snapshot.on.data.error"),
                   config.get("snapshot.mode.configuration.based.start.stream"))

    @property
    def streams(self) -> bool:
        if self.mode == "initial_only":
            return False
        return self.start_stream if self.mode == "configuration_based" else True

    @property
    def snapshots_when_lost(self) -> bool:
        """Whether a position the database no longer holds is answered with a new snapshot."""
        if self.mode == "configuration_based":
            return self.snapshot_on_data_error
        return self.mode in ("when_needed", "always")


@dataclass(frozen=True)
class Decision:
    snapshot: bool
    stream: bool
    lost: bool = False        # the stored position is gone and this mode takes no new snapshot: stop
    resnapshot: bool = False  # a new snapshot because the stored position is gone (say so)


def decide(mode: SnapshotMode, stored: Stored, held: bool) -> Decision:
    """What to do at start. `held`: the database can still resume at the stored position (a
    snapshot that did not finish: the position it was to stream from). Debezium's rules (spec
    PG-34 and the Snapshotter SPI): `always` snapshots every time; `initial` and `initial_only` when
    nothing is stored or the snapshot did not finish; `when_needed` also when the position is gone;
    `no_data` never; `configuration_based` as its properties say."""
    streams = mode.streams
    if stored is Stored.NOTHING:
        snapshot = mode.snapshot_data if mode.mode == "configuration_based" else mode.mode != "no_data"
        return Decision(snapshot, streams)
    gone = not held
    if stored is Stored.POSITION and not streams and mode.mode == "initial_only":
        return Decision(False, False)  # done: nothing is streamed, so a gone position loses nothing
    if mode.mode == "always":
        return Decision(True, streams, resnapshot=gone)
    if mode.mode == "configuration_based":
        if stored is Stored.POSITION and gone and not mode.snapshot_on_data_error:
            return Decision(False, streams, lost=True)
        resnapshot = gone and mode.snapshot_on_data_error
        return Decision(mode.snapshot_data or resnapshot, streams, resnapshot=resnapshot and not mode.snapshot_data)
    if mode.mode == "no_data":
        return Decision(False, streams, lost=gone)
    if stored is Stored.UNFINISHED_SNAPSHOT:
        # taken again; a log position that is gone means a new one (rows deleted in between may
        # remain in materialized tables: the modes that stop for that, stop)
        if gone and not mode.snapshots_when_lost:
            return Decision(False, streams, lost=True)
        return Decision(True, streams, resnapshot=gone)
    if gone:
        if mode.snapshots_when_lost:
            return Decision(True, streams, resnapshot=True)
        return Decision(False, streams, lost=True)
    return Decision(False, streams)
