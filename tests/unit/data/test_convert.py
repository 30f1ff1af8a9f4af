"""``speechkit data convert``: copies at the model's rate and channels equal what the policy reads on the fly,
a manifest of them that trains with ``--data_folder DEST``, reruns that convert only what changed, and bad
inputs refused without losing the copies made or touching a source."""
from __future__ import annotations

import json
import os

import pytest
import soundfile

from speechkit.data.audio_policy import AudioPolicy
from speechkit.data.convert import convert_manifest
from speechkit.errors import AudioError, DataError, ManifestError
from tests.unit.data import convert_files
from tests.unit.data.convert_files import tone

corpus = convert_files.corpus  # a shared fixture: pytest finds it under this name


def test_a_rerun_keeps_the_copies_and_converts_a_changed_source(corpus, tmp_path):
    dest = tmp_path / "dest"
    policy = AudioPolicy(16000)

    def convert(with_policy=policy):
        return convert_manifest(str(corpus / "train.json"), str(dest), with_policy,
                                replacements={"root": str(corpus)})

    first = convert()
    assert (first.converted, first.kept) == (4, 0) and first.seconds == pytest.approx(1.25, abs=0.01)
    again = convert()
    assert (again.converted, again.kept) == (0, 4)
    soundfile.write(corpus / "b.flac", tone(8000, 0.25, 1, freq=700.0), 8000)  # overwritten since
    stamp = os.stat(dest / "audio" / "train" / "b.flac").st_mtime_ns + 1_000_000
    os.utime(corpus / "b.flac", ns=(stamp, stamp))
    third = convert()
    assert (third.converted, third.kept) == (1, 3)
    copy = AudioPolicy(16000).read(dest / "audio" / "train" / "b.flac")
    assert (copy - policy.read(corpus / "b.flac")).abs().max() <= 1 / 32768 + 1e-7
    with pytest.raises(DataError, match="holds copies made with other settings"):
        convert(AudioPolicy(16000, channels=1))


def test_a_copy_is_never_written_over_its_source(tmp_path):
    dest = tmp_path / "dest"
    (dest / "audio" / "train").mkdir(parents=True)
    soundfile.write(dest / "audio" / "train" / "a.flac", tone(16000, 0.2, 1), 16000)
    before = (dest / "audio" / "train" / "a.flac").read_bytes()
    (tmp_path / "train.json").write_text(json.dumps({"a": {"wav": str(dest / "audio" / "train" / "a.flac"),
                                                           "duration": 0.2}}))
    with pytest.raises(AudioError, match="a.flac is its own source; it is never written over"):
        convert_manifest(str(tmp_path / "train.json"), str(dest), AudioPolicy(16000))
    assert (dest / "audio" / "train" / "a.flac").read_bytes() == before
    with pytest.raises(ManifestError, match="--dest would replace this manifest"):
        convert_manifest(str(tmp_path / "train.json"), str(tmp_path), AudioPolicy(16000))
