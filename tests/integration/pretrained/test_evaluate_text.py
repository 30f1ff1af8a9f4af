"""`speechkit evaluate`: the reference field follows speechkit's manifests (`text`), references and hypotheses
are normalised as the model folder (or --text-normalizer) says, and wer.txt says how."""
from __future__ import annotations

import json

import pytest
import soundfile

from speechkit.cli import main
from speechkit.errors import ManifestError
from speechkit.pretrained import evaluate

# id -> (spoken, reference as a user's manifest writes it)
UTTERANCES = {"u1": ("abc", "Abc!"), "u2": ("bad cafe", "Bad, cafe."), "u3": ("feed a bee", "Feed the bee")}


@pytest.fixture
def test_set(tiny_asr, tmp_path):
    model = tiny_asr.write_model_folder(tmp_path / "model")
    manifest = {}
    for utt_id, (spoken, reference) in UTTERANCES.items():
        path = tmp_path / f"{utt_id}.flac"
        wav = tiny_asr.synthesize(spoken)
        soundfile.write(path, wav.numpy(), 16000)
        manifest[utt_id] = {"wav": str(path), "duration": len(wav) / 16000, "text": reference}
    (tmp_path / "test.json").write_text(json.dumps(manifest))
    return model, tmp_path / "test.json"


def _run(model, manifest, output, *flags) -> dict:
    assert main(["evaluate", str(model), str(manifest), "--output", str(output), "--device", "cpu",
                 "--no-progress", *flags]) == 0
    return json.loads((output / "summary.json").read_text())


def test_text_field_by_default_and_normalised_scoring(test_set, tmp_path):
    model, manifest = test_set
    raw = _run(model, manifest, tmp_path / "raw", "--text-normalizer", "none")
    lower = _run(model, manifest, tmp_path / "lower", "--text-normalizer", "lower")
    assert raw["num_ref_sents"] == lower["num_ref_sents"] == 3
    assert lower["num_edits"] == 1 and lower["substitutions"] == 1  # "the" heard as "a": the only error
    assert raw["num_edits"] > lower["num_edits"]  # case and punctuation counted as errors
    report = (tmp_path / "lower" / "wer.txt").read_text()
    assert "Text normalised before scoring: unicode NFKC; numbers as written; lower case;" in report
    assert "Text scored as given (no normaliser)." in (tmp_path / "raw" / "wer.txt").read_text()


def test_the_model_folders_normalizer_is_used(test_set, tmp_path):
    model, manifest = test_set
    with open(model / "hyperparams.yaml", "a") as handle:
        handle.write("\ntext_normalizer: !new:speechkit.data.text_policy.TextNormalizer\n    case: lower\n")
    summary = _run(model, manifest, tmp_path / "out")
    assert summary["num_edits"] == 1
    assert "lower case" in (tmp_path / "out" / "wer.txt").read_text()


def test_reference_field_detection_and_errors(tmp_path):
    assert evaluate.reference_field({"a": {"wav": "x", "words": "A"}}, None, "m.json") == "words"
    assert evaluate.reference_field({"a": {"text": "A", "words": "B"}}, None, "m.json") == "text"
    assert evaluate.reference_field({"a": {"sentence": "A"}}, "sentence", "m.json") == "sentence"
    with pytest.raises(ManifestError, match="no reference text field: looked for text or words in every row; "
                                            "the manifest's fields are duration, sentence, wav"):
        evaluate.reference_field({"a": {"wav": "x", "duration": 1.0, "sentence": "A"}}, None, "m.json")
    with pytest.raises(ManifestError, match="m.json: utterance 'b' has no field 'text' \\(--text-field\\); "
                                            "the manifest's fields are text, wav"):
        evaluate.reference_field({"a": {"text": "A"}, "b": {"wav": "x"}}, "text", "m.json")
    # Rows disagreeing: 'text' is missing in one, 'words' in the other -> an error, not a silent mix.
    with pytest.raises(ManifestError, match="no reference text field"):
        evaluate.reference_field({"a": {"text": "A"}, "b": {"words": "B"}}, None, "m.json")


def test_a_normalizer_choice_that_does_not_exist_is_refused(test_set, tmp_path, capsys):
    model, manifest = test_set
    with pytest.raises(SystemExit):
        main(["evaluate", str(model), str(manifest), "--text-normalizer", "title"])
    assert "invalid choice: 'title'" in capsys.readouterr().err
