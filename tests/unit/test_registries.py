"""The two registries (batch-job tasks, pretrained interfaces): user entries registered by a decorator,
unknown names refused listing the known ones. (Each registry finding every shipped entry from a fresh
interpreter, with nothing else imported: tests/unit/test_import_graph.py.)"""
from __future__ import annotations

import pytest

from speechkit.errors import HparamsError, JobError
from speechkit.jobs.registry import SHIPPED_TASKS, make_task, register_task, task_classes
from speechkit.jobs.tasks import Task
from speechkit.pretrained.registry import SHIPPED_INTERFACES, interface_named, register_interface


def test_a_user_task_and_a_user_interface_register_by_decorator():
    from speechkit.jobs.registry import TASKS
    from speechkit.pretrained.interfaces import Pretrained
    from speechkit.pretrained.registry import INTERFACES

    try:
        @register_task
        class CountTask(Task):
            name = "count-for-test"

        assert isinstance(make_task("count-for-test"), CountTask) and "count-for-test" in task_classes()
        assert set(SHIPPED_TASKS) <= set(task_classes())

        @register_interface
        class EchoForTest(Pretrained):
            pass

        assert interface_named("EchoForTest", "hyperparams.yaml") is EchoForTest
    finally:  # the registries are the process's: leave them as the other tests expect
        TASKS.pop("count-for-test", None)
        INTERFACES.pop("EchoForTest", None)


def test_unknown_names_are_refused_listing_the_known_ones():
    with pytest.raises(JobError, match=r"unknown task 'nope'; known tasks: .*encode.*separate.*transcribe"):
        make_task("nope")
    with pytest.raises(HparamsError, match=r"model.yaml: key 'interface' is 'Nope'; expected one of "
                                           r"EncoderASR, .*Vocoder"):
        interface_named("Nope", "model.yaml")
    with pytest.raises(HparamsError, match=r"key 'interface' is \['EncoderASR'\]"):
        interface_named(["EncoderASR"], "model.yaml")
    assert set(SHIPPED_INTERFACES) == {"EncoderASR", "EncoderDecoderASR", "SeparationModel",
                                       "SpeakerRecognition", "Wav2Vec2Features", "Vocoder"}
