"""``streamcrawl worker`` run with no Kafka and no Faust worker: what it would have started."""

from __future__ import annotations

import argparse
import gc
from dataclasses import dataclass

import pytest

from streamcrawl.topology.admin import generation
from streamcrawl.topology.cli import kafka_commands
from streamcrawl.topology.settings import Settings
from streamcrawl.topology.worker import app as app_module
from streamcrawl.topology.worker import run as worker_run


@dataclass
class WorkerRun:
    """The log level and settings the worker got, and the collector's thresholds when its app
    was built and when it ran."""

    loglevel: str
    settings: Settings
    thresholds_at_build: tuple[int, int, int]
    thresholds_at_run: tuple[int, int, int]


def run_worker(monkeypatch: pytest.MonkeyPatch) -> WorkerRun:
    """``cmd_worker`` with ``create_app`` and the Faust worker replaced, services unchecked."""
    built: list[tuple[int, int, int]] = []
    ran: list[tuple[str, Settings, tuple[int, int, int]]] = []

    def create_app(settings: Settings, **kwargs: object) -> Settings:
        built.append(gc.get_threshold())
        return settings

    class Worker:
        def __init__(self, app: Settings, loglevel: str) -> None:
            self.app, self.loglevel = app, loglevel

        def execute_from_commandline(self) -> None:
            ran.append((self.loglevel, self.app, gc.get_threshold()))

    monkeypatch.setattr(worker_run, "make_worker", Worker)
    monkeypatch.setattr(worker_run, "check_services", lambda settings: None)  # no Kafka
    monkeypatch.setattr(generation, "resolve", lambda settings, strict=False: settings)
    monkeypatch.setattr(app_module, "create_app", create_app)
    kafka_commands.cmd_worker(argparse.Namespace())
    (at_build,), ((loglevel, settings, at_run),) = built, ran
    return WorkerRun(loglevel, settings, at_build, at_run)
