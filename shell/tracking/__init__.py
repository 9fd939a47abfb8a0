"""Experiment trackers behind one small interface (DESIGN.md, "Loggers"): TensorBoard, Weights & Biases
and MLflow, chosen by ``run.loggers``. metrics.csv (shell/logs.py) is always written besides them."""

from shell.tracking.base import FAILED, FINISHED, KILLED, Logger, Loggers, RunEnd, RunStart, flatten_config, numeric
from shell.tracking.registry import LOGGERS, check_loggers, log_videos, open_loggers
from shell.tracking.worker import QueuedTracker, TrackerBackend

__all__ = ["FAILED", "FINISHED", "KILLED", "LOGGERS", "Logger", "Loggers", "QueuedTracker", "RunEnd", "RunStart",
           "TrackerBackend", "check_loggers", "flatten_config", "log_videos", "numeric", "open_loggers"]
