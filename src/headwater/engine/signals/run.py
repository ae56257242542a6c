"""Streaming with signals: the coordinator's streaming phase when signals, incremental snapshots
or notifications are configured (without them the connector streams straight into the queue)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from headwater.engine.connector import Emit
from headwater.engine.signals.actions import SnapshotRequest
from headwater.engine.signals.blocking import run_blocking_snapshot
from headwater.engine.signals.incremental import COLLECTIONS_KEY
from headwater.engine.signals.stage import SignalingStream

if TYPE_CHECKING:
    from headwater.engine.connector import SourceConnector
    from headwater.engine.source import CaptureSource, Offset

log = logging.getLogger(__name__)


def signals_configured(connector: SourceConnector, offset: Offset | None) -> bool:
    """Whether streaming goes through the signaling stage: a signal table, a channel other than
    the stream itself, notifications, or an incremental snapshot the stored offset says runs."""
    config = connector.config
    channels = [c.strip() for c in config.get("signal.enabled.channels") or [] if c.strip()]
    return bool((config.get("signal.data.collection") or "").strip()
                or any(c != "source" for c in channels)
                or config.get("notification.enabled.channels")
                or (offset or {}).get(COLLECTIONS_KEY))


def open_stage(connector: SourceConnector, source: CaptureSource, emit: Emit,
               offset: Offset | None) -> SignalingStream:
    """The stage with the configured channels and notifications."""
    from headwater.engine.signals.channels import open_channels
    from headwater.engine.signals.notifications import NotificationService

    config = connector.config
    channels = open_channels(config, config.get("topic.prefix"))
    stage = SignalingStream(connector, source, emit, offset, channels=channels)
    notifications = NotificationService(config, config.get("topic.prefix"), stage.emit_notifications)
    stage.set_notifications(notifications if notifications.enabled else None)
    return stage


def stream_with_signals(connector: SourceConnector, source: CaptureSource, start: Offset, emit: Emit,
                        stop: threading.Event, stage: SignalingStream,
                        resume_blocking: SnapshotRequest | None = None) -> None:
    """Stream through `stage` until `stop` is set; each blocking snapshot a signal asks for stops the
    stream, reads its tables, and streams again from the last position passed on. `resume_blocking`:
    a blocking snapshot the offset a run starts from says was not finished, read again first."""
    current = threading.Event()
    watcher_done = threading.Event()

    def watch() -> None:  # the connector's stream watches one event: the run's stop, or the stage's
        while not watcher_done.is_set():
            if stop.wait(0.1) or stage.stream_stop.is_set():
                current.set()
                if stop.is_set():
                    return

    watcher = threading.Thread(target=watch, name="headwater-stream-stop", daemon=True)
    watcher.start()
    if stage.last_offset is None:
        stage.last_offset = start  # where signals from other channels are said to arrive until a change streams
    stage.start()
    try:
        request = resume_blocking
        while True:
            if request is None:
                source.stream(start, stage.emit, current)
                if stage.failure is not None:
                    raise stage.failure
                if stop.is_set():
                    return
                request = stage.take_blocking()
                if request is None:
                    return  # the stream ended by itself
            position = stage.with_progress(stage.last_offset or start)
            with stage.lock:
                run_blocking_snapshot(connector, source, stage.incremental, request, position, stage.emit_direct,
                                      stop, stage.notifications)
            request = None
            if stop.is_set():
                return
            current.clear()
            start = source.resume_offset(stage.last_offset or start)
    finally:
        watcher_done.set()
        stage.close()



def initial_notifications(connector: SourceConnector, emit: Emit) -> Any:
    """The NotificationService for the initial snapshot's notifications, or None when none are
    enabled (`emit` hands them on in order with the snapshot's records)."""
    if not connector.config.get("notification.enabled.channels"):
        return None
    from headwater.engine.signals.notifications import NotificationService

    service = NotificationService(connector.config, connector.config.get("topic.prefix"), emit)
    return service if service.enabled else None
