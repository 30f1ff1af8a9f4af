"""templates/whisper_finetune from a copy made by `speechkit new-recipe`: a tiny random Whisper folder
(written by transformers) fine-tuned on a small corpus, stopped mid-epoch and resumed, scored, written back
as a Whisper folder that transformers and speechkit load and that transcribes; and a run of two processes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from speechkit.cli import main as speechkit_main
from speechkit.errors import EXIT_PREEMPTED
from tests.recipes.recipe_helpers import run_script

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
transformers.logging.set_verbosity_error()

#: A test-sized run: big steps, short decoding, few valid utterances.
TINY_RUN = ["--noprogressbar", "--corpus_size", "null", "--lr", "0.002", "--warmup_steps", "2",
            "--max_new_tokens", "6", "--valid_utterances", "4", "--check_data", "False"]


@pytest.fixture(scope="module")
def tiny_whisper(tmp_path_factory) -> Path:
    from tests.helpers.whisper_folders import build_whisper_folder

    path = tmp_path_factory.mktemp("whisper-tiny")
    build_whisper_folder(str(path), d_model=32, encoder_layers=1, decoder_layers=1, heads=2, ffn=64)
    return path


def _losses(train_log: Path, stage: str) -> list:
    return [float(line.split("loss: ")[1].split(" ")[0]) for line in train_log.read_text().splitlines()
            if f"stage: {stage} " in line]


@pytest.mark.slow
def test_fine_tunes_resumes_mid_epoch_scores_and_exports_a_folder_that_transcribes(tmp_path, tiny_corpus,
                                                                                     tiny_whisper):
    recipe = tmp_path / "my_whisper"
    assert speechkit_main(["new-recipe", "whisper_finetune", str(recipe)]) == 0
    args = ["hparams/train.yaml", "--data_folder", str(tiny_corpus), "--whisper", str(tiny_whisper),
            "--number_of_epochs", "2", *TINY_RUN]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    # Stopped as a scheduler stops a job, during the first epoch's first batch: saved there, exit 75.
    first = subprocess.Popen([sys.executable, "train.py", *args], cwd=recipe, env=env, text=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = []
    for line in first.stderr:
        seen.append(line)
        if "train epoch 1:" in line:  # logged once the loader runs, the signal handler installed
            first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == EXIT_PREEMPTED, "".join(seen)[-3000:]
    assert "Preempted: checkpoint saved at epoch 1, batch 1" in "".join(seen)
    resumed = run_script(recipe / "train.py", args, timeout=180)
    assert "Recovered checkpoint" in resumed.stderr
    output = recipe / "results" / "whisper_finetune" / "1234"
    valid = _losses(output / "train_log.txt", "valid")
    assert len(valid) == 2 and valid[-1] < valid[0], valid  # it learns
    assert "utt-test-" in (output / "wer_test.txt").read_text()
    # The checkpoint the test set was scored with is what was written back, in transformers' format.
    exported = output / "model"
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} <= \
        set(os.listdir(exported))
    from speechkit.pretrained import WhisperASR
    from speechkit.pretrained.huggingface.whisper import load_whisper_folder

    tuned, start = load_whisper_folder(exported), load_whisper_folder(tiny_whisper)
    assert not torch.equal(tuned.model.decoder.embed_tokens.weight, start.model.decoder.embed_tokens.weight)
    saved = [torch.load(path, weights_only=True) for path in (output / "save").glob("CKPT+*/whisper.ckpt")]
    assert any(all(torch.equal(state[key], tensor) for key, tensor in tuned.model.state_dict().items())
               for state in saved)
    hf_model = transformers.WhisperForConditionalGeneration.from_pretrained(str(exported)).eval()
    features, tokens = torch.randn(1, 80, 3000), torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        torch.testing.assert_close(tuned.model(features, tokens),
                                   hf_model(input_features=features, decoder_input_ids=tokens).logits,
                                   atol=1e-4, rtol=0)
    asr = WhisperASR.from_hparams(str(exported))
    text = asr.transcribe_file(tiny_corpus / "test" / "utt-test-000.flac", language="en", max_new_tokens=6)
    assert isinstance(text, str)
    wave = asr.load_audio(tiny_corpus / "test" / "utt-test-000.flac")
    assert text == asr.folder.tokenizer.decode(asr.transcribe_batch(wave[None], language="en",
                                                                    max_new_tokens=6)[1][0])


@pytest.mark.slow
def test_two_gloo_processes_train_score_and_export(tmp_path, tiny_corpus, tiny_whisper):
    recipe = tmp_path / "ddp"
    assert speechkit_main(["new-recipe", "whisper_finetune", str(recipe)]) == 0
    done = run_script(recipe / "train.py", ["hparams/train.yaml", "--data_folder", str(tiny_corpus),
                                            "--whisper", str(tiny_whisper), "--number_of_epochs", "1",
                                            "--num_workers", "2", "--freeze_encoder", "True",
                                            "--train_loader_kwargs.batch_size", "4", "--max_duration", "0.9",
                                            *TINY_RUN], timeout=180)
    assert "2 process(es) x 4 items" in done.stderr
    output = recipe / "results" / "whisper_finetune" / "1234"
    # Every process's test utterances are scored (the WER file gathers them): 12 in all.
    assert (output / "wer_test.txt").read_text().count("utt-test-") >= 12
    from speechkit.pretrained.huggingface.whisper import load_whisper_folder

    tuned, start = load_whisper_folder(output / "model"), load_whisper_folder(tiny_whisper)
    # The encoder was frozen: unchanged; the decoder learnt.
    for name, tensor in start.model.encoder.state_dict().items():
        assert torch.equal(tuned.model.encoder.state_dict()[name], tensor), name
    assert not torch.equal(tuned.model.decoder.layers[0].fc1.weight, start.model.decoder.layers[0].fc1.weight)


def test_a_transcript_too_long_for_the_decoder_is_refused_naming_its_id(tmp_path, tiny_corpus):
    from speechkit.errors import DataError
    from speechkit.models.whisper.tokenizer import WhisperTokenizer
    from tests.helpers.scripts import load_script
    from tests.helpers.whisper_folders import build_tokenizer

    template = Path(__file__).resolve().parents[2] / "templates" / "whisper_finetune"
    train = load_script(template / "train.py", "whisper_finetune_template", search_path=template)
    build_tokenizer(str(tmp_path))
    tokenizer = WhisperTokenizer.from_file(tmp_path / "tokenizer.json")
    manifests = {split: str(tiny_corpus / f"{split}.json") for split in ("train", "valid", "test")}
    from speechkit.data.audio_policy import AudioPolicy

    hparams = {"data_folder": str(tiny_corpus), "max_duration": 30.0, "valid_utterances": 2,
               "audio_policy": AudioPolicy(sample_rate=16000, channels="mix", convert=True)}
    datasets = train.dataio_prepare(hparams, manifests, tokenizer, room=40)
    item = datasets["test"][0]
    assert item["sig"].dim() == 1  # read through the audio policy: mono at 16 kHz
    assert tokenizer.decode(item["tokens"].tolist()) == " " + item["text"]  # Whisper's leading space
    short = train.dataio_prepare(hparams, manifests, tokenizer, room=2)["test"]
    message = r"utterance utt-test-\d+: its transcript is \d+ tokens, more than the 2 "
    with pytest.raises(DataError, match=message):
        [short[index] for index in range(len(short))]
