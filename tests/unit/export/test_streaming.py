"""Streaming recognition is chunk invariant: for any chunking, the encoder's outputs equal the offline ones
within 1e-5 and the final transcript is the offline transcript; streams in a batch do not see each other."""
from __future__ import annotations

import random

import pytest
import torch

from speechkit.data.resample import resample
from speechkit.errors import AudioError, SpeechkitError
from speechkit.pretrained import Pretrained
from speechkit.streaming import StreamingASR
from tests.helpers.export_models import speech_like, write_recognizer

LENGTHS = [24_000, 13_333, 5_001, 700]


@pytest.fixture(scope="module")
def asr(tmp_path_factory):
    return Pretrained.from_hparams(str(write_recognizer(tmp_path_factory.mktemp("streaming"))))


@pytest.fixture(scope="module")
def offline(asr):
    wavs, lengths = speech_like(LENGTHS, seed=1)
    log_probs, frames = asr.encode_batch(wavs, lengths)
    hidden, hidden_frames = wavs, lengths
    for name in asr.hparams["encoder_pipeline"][:-1]:
        hidden, hidden_frames = asr.mods[name](hidden, hidden_frames)
    return wavs, lengths, log_probs, frames, hidden, asr.transcribe_batch(wavs, lengths)[0]


def _pieces(wav: torch.Tensor, chunk) -> list:
    if chunk == "random":
        rng = random.Random(len(wav))
        cuts, position = [], 0
        while position < len(wav):
            position += rng.randint(1, 4000)
            cuts.append(min(position, len(wav)))
        return [wav[a:b] for a, b in zip([0] + cuts[:-1], cuts)]
    return list(wav.split(chunk))


@pytest.mark.parametrize("chunk", [160 * 16, 320 * 16, 640 * 16, "random"])  # 160, 320, 640 ms; random
def test_stream_equals_offline_for_any_chunking(asr, offline, chunk):
    wavs, lengths, log_probs, frames, hidden, texts = offline
    assert any(texts)
    for i, n in enumerate(lengths.tolist()):
        stream = asr.stream()
        partials = [stream.accept(piece) for piece in _pieces(wavs[i, :n], chunk)]
        final = stream.finish()
        assert final == texts[i]
        for before, after in zip(partials, partials[1:] + [final]):  # partial texts only grow
            assert after.startswith(before)
        count = int(frames[i])
        assert stream.log_probs.shape[0] == count
        assert (stream.log_probs - log_probs[i, :count]).abs().max() < 1e-5
        assert (stream.encoded - hidden[i, :count]).abs().max() < 1e-5


def test_streams_in_one_batch_equal_each_alone(asr, offline):
    wavs, lengths, log_probs, frames, _, texts = offline
    streams = StreamingASR(asr).batch(len(LENGTHS))
    rng = random.Random(7)
    positions, finals = [0] * len(LENGTHS), {}
    while len(finals) < len(LENGTHS):
        chunks = []
        for i, n in enumerate(LENGTHS):
            if positions[i] >= n or rng.random() < 0.3:  # some streams bring nothing this time
                chunks.append(None)
                continue
            step = rng.randint(100, 6000)
            chunks.append(wavs[i, positions[i]:min(n, positions[i] + step)])
            positions[i] = min(n, positions[i] + step)
        streams.accept(chunks)
        ended = [i for i, n in enumerate(LENGTHS) if positions[i] >= n and i not in finals]
        finals.update(zip(ended, streams.finish(ended)))  # each stream ends when its audio does
    assert [finals[i] for i in range(len(LENGTHS))] == texts
    assert streams.finished
    with pytest.raises(SpeechkitError, match="has finished"):
        streams.finish([0])
    pair = StreamingASR(asr).batch(2)
    pair.accept([wavs[0, :3000], wavs[1, :3000]])
    pair.finish([0])
    with pytest.raises(SpeechkitError, match="stream 0 has finished; it takes no more audio"):
        pair.accept([wavs[0, 3000:4000], None])
    with pytest.raises(SpeechkitError, match="stream 0 has finished already"):
        pair.finish([0])
    pair.accept([None, wavs[1, 3000:LENGTHS[1]]])  # the other stream goes on
    assert pair.finish() == [texts[1]]
    for i in range(len(LENGTHS)):
        count = int(frames[i])
        assert (streams.stream_log_probs(i) - log_probs[i, :count]).abs().max() < 1e-5


def test_stereo_chunks_are_averaged_and_other_rates_refused(asr, offline):
    wavs, lengths, _, _, _, texts = offline
    stream = asr.stream()
    mono = wavs[0, :LENGTHS[0]]
    for piece in mono.split(4000):
        stream.accept(torch.stack([piece + 0.1, piece - 0.1], dim=1))  # (time, channels) -> the mean
    assert stream.finish() == texts[0]
    with pytest.raises(AudioError, match=r"at 8000 Hz but the stream was opened for 16000 Hz; open a "
                                         r"stream at that rate \(stream\(sample_rate=8000\)\)"):
        asr.stream().accept(mono[:800], sample_rate=8000)
    with pytest.raises(AudioError, match="sample_rate must be a positive whole number of Hz, got 0"):
        asr.stream(sample_rate=0)
    with pytest.raises(AudioError, match="NaN"):
        asr.stream().accept(torch.tensor([0.0, float("nan")]))


@pytest.mark.parametrize("rate, chunk", [(48000, 4800), (44100, 1), (44100, "random"), (8000, 333)])
def test_a_stream_at_another_rate_hears_what_the_whole_recording_gives(asr, rate, chunk):
    """Chunks at the client's rate are resampled chunk by chunk: the scores equal those of the whole
    recording converted by the audio policy (as a file at that rate is read), the final text the offline
    one."""
    from speechkit.data.audio_policy import shared_policy

    wave = speech_like([12_000], seed=4)[0][0]
    recording = resample(wave, 16000, rate)
    if chunk == 1:
        recording = recording[:rate // 10]  # one call per sample: 100 ms keep it fast
    heard = shared_policy(16000).apply(recording, rate)
    log_probs, frames = asr.encode_batch(heard.unsqueeze(0), torch.tensor([heard.numel()]))
    stream = asr.stream(sample_rate=rate)
    for piece in _pieces(recording, chunk):
        stream.accept(piece, sample_rate=rate)
    final = stream.finish()
    assert stream.log_probs.shape[0] == int(frames[0])
    assert (stream.log_probs - log_probs[0, :int(frames[0])]).abs().max() < 1e-4
    assert final == asr.transcribe_batch(heard.unsqueeze(0), torch.tensor([heard.numel()]))[0][0]
    assert final or chunk == 1


@pytest.fixture(scope="module")
def asr_with_lm(tmp_path_factory):
    return Pretrained.from_hparams(str(write_recognizer(tmp_path_factory.mktemp("streaming-lm"), lm=True)))


@pytest.mark.parametrize("chunk", [160 * 16, 777, "random"])
def test_the_beam_search_with_the_lm_runs_along_the_stream(asr_with_lm, chunk):
    """The folder's CTC beam search with its LM searches each chunk's frames as they arrive: before the
    end every frame so far has been searched, and the final hypotheses and scores are exactly those of the
    search over the stream's whole scores, the final transcript the offline one."""
    from speechkit.decoding import ctc_prefix_beam_search

    wavs, lengths = speech_like([24_000, 9_001], seed=2)
    offline_texts, offline_tokens = asr_with_lm.transcribe_batch(wavs, lengths)
    search = asr_with_lm.hparams["decoder"]
    for i, n in enumerate(lengths.tolist()):
        stream = asr_with_lm.stream()
        for piece in _pieces(wavs[i, :n], chunk):
            stream.accept(piece)
        beams = stream._batch.searches[0]
        assert beams.frames == stream.log_probs.shape[0] > 0  # nothing left for the end but its frames
        final = stream.finish()
        scores = stream.log_probs
        whole = ctc_prefix_beam_search(scores[None], torch.tensor([scores.shape[0]]), search.beam_size,
                                       return_nbest=True, **search.options)[0]
        assert beams.nbest() == whole
        assert stream.final_tokens == whole[0][0] == offline_tokens[i]
        assert final == offline_texts[i]


def test_a_finished_stream_refuses_more_audio(asr):
    stream = asr.stream()
    stream.accept(torch.zeros(3000))
    stream.finish()
    with pytest.raises(SpeechkitError, match="has finished"):
        stream.accept(torch.zeros(100))
    with pytest.raises(SpeechkitError, match="has finished"):
        stream.finish()


def test_models_that_read_the_future_are_refused(tmp_path):
    offline_model = Pretrained.from_hparams(str(write_recognizer(tmp_path / "offline", streaming=False)))
    with pytest.raises(SpeechkitError, match=r"'normalize' \(UtteranceNormalization\) normalizes with "
                                             "statistics of the whole recording"):
        offline_model.stream()
    offline_model.mods["normalize"] = asr_normalization()
    with pytest.raises(SpeechkitError, match="bidirectional"):
        offline_model.stream()


def asr_normalization():
    from speechkit.features import GlobalNormalization

    return GlobalNormalization(16).eval()


@pytest.mark.parametrize("backend", ["onnx", "torchscript"])
def test_exported_stream_step_streams_as_pytorch(asr, offline, tmp_path, backend):
    pytest.importorskip("onnxruntime")
    import json
    import warnings

    from speechkit.export import export_folder

    warnings.simplefilter("ignore")
    source = write_recognizer(tmp_path / "model")
    folder = export_folder(source, tmp_path / "exported", formats=[backend])
    entry = json.loads((folder / "export.json").read_text())["artefacts"][f"stream_step.{backend}"]
    assert entry["max_abs_diff"] < 1e-4 and entry["inputs"]["state"][0] == "layers"
    graph = Pretrained.from_hparams(str(folder), backend=backend)
    wavs, lengths, log_probs, frames, hidden, texts = offline
    streams = StreamingASR(graph).batch(2)
    for a, b in zip(_pieces(wavs[0, :LENGTHS[0]], "random"), _pieces(wavs[1, :LENGTHS[1]], 3000)):
        streams.accept([a, b])
    rest = _pieces(wavs[0, :LENGTHS[0]], "random")[len(_pieces(wavs[1, :LENGTHS[1]], 3000)):]
    for piece in rest:
        streams.accept([piece, None])
    assert streams.finish() == texts[:2]
    for i in range(2):
        count = int(frames[i])
        assert (streams.stream_log_probs(i) - log_probs[i, :count]).abs().max() < 1e-5
        assert (streams.stream_encoded(i) - hidden[i, :count]).abs().max() < 1e-5


def test_the_exported_folder_of_an_offline_model_does_not_stream(tmp_path):
    pytest.importorskip("onnxruntime")
    import warnings

    from speechkit.export import export_folder

    warnings.simplefilter("ignore")
    folder = export_folder(write_recognizer(tmp_path / "offline", streaming=False), tmp_path / "exported")
    graph = Pretrained.from_hparams(str(folder), backend="onnx")
    with pytest.raises(SpeechkitError, match="normalizes with statistics of the whole recording"):
        graph.stream()


@pytest.mark.parametrize("length", [1, 100, 256, 257, 300, 512, 513, 1000, 4801])
def test_streaming_fbank_equals_fbank_at_every_length(length):
    from speechkit.features import Fbank
    from speechkit.streaming import StreamingFbank

    fbank = Fbank(n_mels=16)
    wav = torch.randn(length, generator=torch.Generator().manual_seed(length))
    expected, frames = fbank(wav.unsqueeze(0), torch.tensor([length]))
    for chunk in (1 if length <= 600 else 37, 7, 160, length):
        stream = StreamingFbank(fbank)
        parts = [stream.accept(piece) for piece in wav.split(chunk)] + [stream.finish()]
        got = torch.cat(parts)
        assert got.shape[0] == int(frames[0]) == 1 + length // 160
        assert (got - expected[0]).abs().max() < 1e-4, chunk
    assert StreamingFbank(fbank).finish().shape == (0, 16)  # an empty stream has no frames, as offline
