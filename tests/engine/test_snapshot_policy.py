"""`snapshot.mode` as a table of cases: (mode, what is stored, whether the database still holds
it) -> snapshot?, stream?, stop because the position is lost?"""

from __future__ import annotations

import pytest

from headwater.engine.snapshot_policy import Decision, SnapshotMode, Stored, decide

N, U, P = Stored.NOTHING, Stored.UNFINISHED_SNAPSHOT, Stored.POSITION
SNAP, STREAM, LOST, AGAIN = "snapshot", "stream", "lost", "again"


def _mode(name: str, **kw: bool) -> SnapshotMode:
    return SnapshotMode(name, **kw)


CB = "configuration_based"
CASES = [
    # mode, stored, held -> outcome
    ("initial", N, True, {SNAP, STREAM}),
    ("initial", U, True, {SNAP, STREAM}),
    ("initial", U, False, {LOST}),                      # a partial snapshot and its log position gone
    ("initial", P, True, {STREAM}),
    ("initial", P, False, {LOST}),
    ("initial_only", N, True, {SNAP}),
    ("initial_only", U, True, {SNAP}),
    ("initial_only", P, True, set()),                    # done: nothing more to do
    ("initial_only", P, False, set()),              # nothing streams: nothing lost
    ("when_needed", N, True, {SNAP, STREAM}),
    ("when_needed", U, False, {SNAP, STREAM, AGAIN}),
    ("when_needed", P, True, {STREAM}),
    ("when_needed", P, False, {SNAP, STREAM, AGAIN}),
    ("always", N, True, {SNAP, STREAM}),
    ("always", P, True, {SNAP, STREAM}),
    ("always", P, False, {SNAP, STREAM, AGAIN}),
    ("no_data", N, True, {STREAM}),
    ("no_data", P, True, {STREAM}),
    ("no_data", P, False, {LOST}),
    ("no_data", U, True, {STREAM}),
]


@pytest.mark.parametrize("mode,stored,held,outcome", CASES, ids=[f"{m}-{s.value}-{h}" for m, s, h, _ in CASES])
def test_the_snapshot_mode_decides(mode, stored, held, outcome):
    decision = decide(_mode(mode), stored, held)
    assert _outcome(decision) == outcome


CB_CASES = [
    # snapshot.data, on.data.error, start.stream; stored, held -> outcome
    (True, False, True, N, True, {SNAP, STREAM}),
    (False, False, True, N, True, {STREAM}),
    (False, False, False, N, True, set()),
    (True, False, False, N, True, {SNAP}),
    (False, False, True, P, True, {STREAM}),
    (True, False, True, P, True, {SNAP, STREAM}),
    (False, False, True, P, False, {LOST}),
    (False, True, True, P, False, {SNAP, STREAM, AGAIN}),
    (True, True, True, P, False, {SNAP, STREAM}),       # a snapshot anyway: not "again"
    (False, False, True, U, True, {STREAM}),
]


@pytest.mark.parametrize("data,on_error,stream,stored,held,outcome", CB_CASES)
def test_configuration_based_follows_its_four_properties(data, on_error, stream, stored, held, outcome):
    mode = _mode(CB, snapshot_data=data, snapshot_on_data_error=on_error, start_stream=stream)
    assert _outcome(decide(mode, stored, held)) == outcome


def _outcome(decision: Decision) -> set[str]:
    out = set()
    if decision.lost:
        return {LOST}
    if decision.snapshot:
        out.add(SNAP)
    if decision.stream:
        out.add(STREAM)
    if decision.resnapshot:
        out.add(AGAIN)
    return out


@pytest.mark.parametrize("alias", ["never", "schema_only", "initial_schema_only"])
def test_debeziums_other_names_for_no_data(alias):
    class Config(dict):
        def get(self, key, default=None):  # type: ignore[override]
            return super().get(key, default)

    assert SnapshotMode.from_config(Config({"snapshot.mode": alias})).mode == "no_data"
