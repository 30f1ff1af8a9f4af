"""Whisper greedy decoding on CPU: speechkit against transformers' ``generate()`` on the same weights and
features, one and two threads, batch 1 and 8, repetitions interleaved (speechkit, transformers, speechkit,
...) so that a change in the machine's load hits both alike.

The model is a random Whisper ``base``-sized model (d_model 512, 6 + 6 layers, 8 heads, the multilingual
vocabulary of 51865 tokens) built here with transformers; random weights rarely emit end of text, so every
item decodes ``--tokens`` tokens after its 4-token prompt (language forced, no timestamps), which makes the
two sides do the same work. The tokens are checked equal before timing. Times are end to end from log-mel
features (encoder included), and the decoder's share (times with the encoder states given) is shown too.
``--onnx`` adds speechkit's ``backend="onnx"`` (the three graphs of ``speechkit.export.whisper``, run by
onnxruntime with the same searches; its tokens checked equal to PyTorch's first).

Usage:
    python benchmarks/whisper.py                 # about 5 minutes on a quiet 2-core machine
    python benchmarks/whisper.py --repeats 1 --tokens 32
    python benchmarks/whisper.py --repeats 2 --tokens 32 --threads 1 --batches 1 8 --decoder-only --onnx
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.machine import machine_line  # noqa: E402
from speechkit.models.whisper.transcribe import DecodingOptions, WhisperTranscriber  # noqa: E402
from speechkit.pretrained.huggingface.whisper import load_whisper_folder  # noqa: E402

BASE = dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
            decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, vocab_size=51865)


def build(folder: str):
    import transformers

    transformers.logging.set_verbosity_error()
    config = transformers.WhisperConfig(**BASE, pad_token_id=50257, bos_token_id=50257, eos_token_id=50257,
                                        decoder_start_token_id=50258)
    torch.manual_seed(0)
    model = transformers.WhisperForConditionalGeneration(config).eval()
    model.save_pretrained(folder)
    generation = {"decoder_start_token_id": 50258, "eos_token_id": 50257, "pad_token_id": 50257,
                  "no_timestamps_token_id": 50363, "prev_sot_token_id": 50361, "max_length": 448,
                  "lang_to_id": {"<|en|>": 50259}, "task_to_id": {"transcribe": 50359, "translate": 50358},
                  "is_multilingual": True, "begin_suppress_tokens": [220, 50257],
                  "suppress_tokens": [1, 2, 7, 8, 9, 10, 14, 25, 50358, 50359, 50360, 50361, 50362]}
    Path(folder, "generation_config.json").write_text(json.dumps(generation))
    model.generation_config = transformers.GenerationConfig.from_pretrained(folder)
    return model


def random_features(batch: int) -> torch.Tensor:
    """(batch, 80, 3000) log-mel-like features drawn from a seed of the batch size (the same in every run)."""
    generator = torch.Generator().manual_seed(batch)
    return torch.randn(batch, 80, 3000, generator=generator) * 0.5 + torch.randn(batch, 80, 1,
                                                                               generator=generator)


def generated_tokens(hf_model, features: torch.Tensor, tokens: int) -> list:
    """``generate()``'s tokens after its 4-token prompt, one list per item: what speechkit must match."""
    with torch.no_grad():
        out = hf_model.generate(features, language="en", max_new_tokens=tokens, return_dict_in_generate=True,
                                force_unique_generate_call=True)
    return [row[4:] for row in out.sequences.tolist()]


def cell(value: float, width: int, suffix: str = "") -> str:
    """A table cell: the figure, or ``-`` for what was not timed (end-to-end columns with --decoder-only)."""
    text = "-" if math.isnan(value) else f"{value:.2f}{suffix}"
    return f"{text:>{width}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--decoder-only", action="store_true",
                        help="Time only the decoding from encoder states (the encoder is the same work on "
                             "both sides; on a loaded machine it takes most of the time).")
    parser.add_argument("--onnx", action="store_true",
                        help="Also time speechkit's ONNX backend (exported here first; onnxruntime needed).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        hf_model = build(folder)
        loaded = load_whisper_folder(folder)
        if args.onnx:
            from speechkit.export.whisper import export_whisper_onnx
            from speechkit.pretrained.whisper_onnx import OnnxWhisper

            export_whisper_onnx(loaded.model, folder)  # checked against PyTorch as it is written
            runtimes = {threads: OnnxWhisper(folder, loaded.model.config, threads=threads)
                        for threads in args.threads}
    transcriber = WhisperTranscriber(loaded.model, loaded.generation, None)
    onnx = WhisperTranscriber(loaded.model, loaded.generation, None) if args.onnx else None
    options = DecodingOptions(language="en", max_new_tokens=args.tokens)
    print(machine_line())
    parameters = sum(p.numel() for p in loaded.model.parameters()) / 1e6
    print(f"random Whisper base ({parameters:.1f} M parameters), "
          f"greedy, {args.tokens} tokens per item, {args.repeats} interleaved repeats, median seconds")
    header = (f"{'threads':>7} {'batch':>5} | {'speechkit':>9} {'transformers':>12} {'ratio':>6} | "
              f"{'sk decoder':>10} {'tf decoder':>10} {'ratio':>6}")
    if onnx is not None:
        header += f" | {'onnx':>6} {'ratio':>6} | {'onnx decoder':>12} {'ratio':>6}"
    print(header)
    print("-" * len(header))
    for threads in args.threads:
        torch.set_num_threads(threads)
        for batch in args.batches:
            features = random_features(batch)
            with torch.no_grad():
                states = loaded.model.encoder(features)
                encoder_outputs = hf_model.model.encoder(features)

            def ours(features=features, batch=batch):
                return [t.tokens for t in transcriber.decode_features(features, ["en"] * batch, options)]

            def theirs(features=features):
                return hf_model.generate(features, language="en", max_new_tokens=args.tokens)

            def ours_decoder(states=states, ours=ours):
                transcriber.encode_features = lambda _: states
                try:
                    return ours()
                finally:
                    transcriber.encode_features = loaded.model.encoder

            def theirs_decoder(encoder_outputs=encoder_outputs):
                return hf_model.generate(encoder_outputs=encoder_outputs, language="en",
                                         max_new_tokens=args.tokens)

            if onnx is not None:
                runtime = runtimes[threads]
                onnx_states = runtime.encode(features)

                def ours_onnx(features=features, batch=batch, runtime=runtime):
                    onnx.encode_features, onnx.decoder = runtime.encode, runtime
                    return [t.tokens for t in onnx.decode_features(features, ["en"] * batch, options)]

                def ours_onnx_decoder(features=features, batch=batch, runtime=runtime, states=onnx_states):
                    onnx.encode_features, onnx.decoder = (lambda _: states), runtime
                    return [t.tokens for t in onnx.decode_features(features, ["en"] * batch, options)]

            expected = generated_tokens(hf_model, features, args.tokens)
            with torch.no_grad():
                got = ours()
                if [row[:len(g)] for row, g in zip(expected, got)] != got:
                    raise SystemExit(f"speechkit's tokens differ from transformers' on the benchmark model:\n"
                                     f"{got}\n{expected}")
                if onnx is not None and ours_onnx() != got:
                    raise SystemExit(f"the ONNX backend's tokens differ:\n{ours_onnx()}\n{got}")
            times = {name: [] for name in ("ours", "theirs", "ours_decoder", "theirs_decoder", "onnx",
                                           "onnx_decoder")}
            with torch.no_grad():
                for _ in range(args.repeats):
                    runs = (("ours_decoder", ours_decoder), ("theirs_decoder", theirs_decoder))
                    if onnx is not None:
                        runs += (("onnx_decoder", ours_onnx_decoder),)
                    if not args.decoder_only:
                        runs = (("ours", ours), ("theirs", theirs)) + runs
                        if onnx is not None:
                            runs += (("onnx", ours_onnx),)
                    for name, run in runs:
                        start = time.perf_counter()
                        run()
                        times[name].append(time.perf_counter() - start)
            median = {name: statistics.median(values) if values else float("nan")
                      for name, values in times.items()}
            row = [cell(median["ours"], 9), cell(median["theirs"], 12),
                   cell(median["theirs"] / median["ours"], 6, "x"), "|", cell(median["ours_decoder"], 10),
                   cell(median["theirs_decoder"], 10),
                   cell(median["theirs_decoder"] / median["ours_decoder"], 6, "x")]
            if onnx is not None:
                row += ["|", cell(median["onnx"], 6), cell(median["theirs"] / median["onnx"], 6, "x"), "|",
                        cell(median["onnx_decoder"], 12),
                        cell(median["theirs_decoder"] / median["onnx_decoder"], 6, "x")]
            print(f"{threads:>7} {batch:>5} |", " ".join(row), flush=True)


if __name__ == "__main__":
    main()
