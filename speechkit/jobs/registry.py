"""The registry of batch-job tasks: task name -> :class:`speechkit.jobs.tasks.Task` subclass.

Task modules import this one to register their classes; this module imports none of them (docs/design.md,
layers). The shipped tasks are listed by the module that defines them and imported when first looked up, so
``make_task("separate")`` works without the caller importing :mod:`speechkit.jobs.audio_tasks` first.

Example:
    >>> make_task("transcribe", {"audio_field": "flac"}).audio_field
    'flac'
"""
from __future__ import annotations

import importlib
from typing import Optional

from speechkit.errors import JobError

#: name -> Task subclass, filled by :func:`register_task`.
TASKS: dict = {}

#: name -> the module that defines and registers the shipped task of that name.
SHIPPED_TASKS = {
    "transcribe": "speechkit.jobs.tasks",
    "encode": "speechkit.jobs.tasks",
    "separate": "speechkit.jobs.audio_tasks",
    "extract": "speechkit.jobs.audio_tasks",
    "generate": "speechkit.jobs.generate_task",
}


def register_task(cls: type) -> type:
    """Class decorator: make a :class:`~speechkit.jobs.tasks.Task` subclass available to jobs by its name."""
    if not getattr(cls, "name", None):
        raise TypeError(f"{cls.__name__} needs a class attribute 'name'")
    TASKS[cls.name] = cls
    return cls


def task_classes() -> dict:
    """Every task by name: the shipped ones (imported here on first call) and any registered by the user."""
    for module in sorted(set(SHIPPED_TASKS.values())):
        importlib.import_module(module)
    return dict(TASKS)


def make_task(name: str, options: Optional[dict] = None):
    """The task registered as ``name``, built with its options (e.g. ``{"audio_field": "flac"}``).

    Raises:
        JobError: no task of that name, listing the known ones.
    """
    if name not in TASKS and name in SHIPPED_TASKS:
        importlib.import_module(SHIPPED_TASKS[name])
    if name not in TASKS:
        raise JobError(f"unknown task {name!r}; known tasks: {', '.join(sorted(task_classes()))}")
    return TASKS[name](**(options or {}))
