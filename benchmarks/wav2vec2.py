"""Self-supervised pretraining throughput (seconds of audio per second): speechkit's wav2vec 2.0, HuBERT and
BEST-RQ steps against transformers at the same configuration, weights and batch, in the same run.

- wav2vec 2.0: against ``Wav2Vec2ForPreTraining`` (its whole pretraining step).
- HuBERT: transformers has no HuBERT pretraining model; the peer is ``HubertModel``'s forward and backward
  with the same masked-prediction head (projection, cosine logits, cross-entropy on masked frames) on its
  ``last_hidden_state``. Both get the same precomputed targets, so the rows compare the encoder and the
  loss (speechkit's own step would add the targets' MFCCs and k-means lookup, listed apart as
  ``hubert+targets``, with no peer).
- WavLM: the same HuBERT step on the WavLM encoder (gated relative position bias) against ``WavLMModel``.
- BEST-RQ: speechkit alone (transformers has none); its step includes the filterbanks and the frozen
  quantizer's codes.

A step is what a pretraining step costs: drawing the masks and distractors, forward (feature encoder,
masking, Transformer, quantizer, contrastive and diversity losses), backward and an AdamW update; for bf16
both run under the same autocast. transformers takes its masks and distractors from its own helpers
(``_compute_mask_indices``, ``_sample_negative_indices``), as its pretraining example does; group-norm
models get no attention mask there, as its documentation asks, so both see the same padded batch.

Usage:
    python benchmarks/wav2vec2.py                                 # small and BASE, fp32 and bf16, CPU
    python benchmarks/wav2vec2.py --configs small --dtypes fp32 --steps 5
    python benchmarks/wav2vec2.py --objectives hubert,wavlm,bestrq --dtypes fp32
    python benchmarks/wav2vec2.py --device cuda --batch-seconds 60 --steps 10
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.machine import machine_line  # noqa: E402
from speechkit.models.wav2vec2 import (  # noqa: E402
    BestRqPretraining,
    ClusterTargets,
    HubertPretraining,
    MiniBatchKMeans,
    Wav2Vec2Config,
    Wav2Vec2Pretraining,
    masked_cross_entropy,
    mfcc_frames,
    span_mask,
)
from speechkit.models.wav2vec2.huggingface import (  # noqa: E402
    encoder_config_to_huggingface,
    encoder_state_to_huggingface,
)
from speechkit.pretrained.huggingface.wav2vec2 import (  # noqa: E402
    config_to_huggingface,
    state_dict_to_huggingface,
)

RATE = 16000


def make_batch(seconds: float, utterance_seconds: float, seed: int) -> tuple:
    """Utterances of about ``utterance_seconds`` (within 10%) filling ``seconds`` of audio."""
    generator = torch.Generator().manual_seed(seed)
    count = max(1, round(seconds / utterance_seconds))
    longest = int(utterance_seconds * RATE)
    lengths = longest - torch.randint(0, longest // 10 + 1, (count,), generator=generator)
    lengths[0] = longest
    wav = torch.randn(count, longest, generator=generator) * (torch.arange(longest) < lengths[:, None])
    return wav, lengths


def speechkit_step(model, optimizer, wav, lengths, autocast):
    with autocast():
        loss = model(wav, lengths).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def transformers_step(model, optimizer, wav, lengths, autocast):
    from transformers.models.wav2vec2.modeling_wav2vec2 import (
        _compute_mask_indices,
        _sample_negative_indices,
    )

    config = model.config
    frames = int(model._get_feat_extract_output_lengths(wav.shape[1]))
    mask = _compute_mask_indices((wav.shape[0], frames), config.mask_time_prob, config.mask_time_length,
                                 min_masks=config.mask_time_min_masks)
    negatives = _sample_negative_indices((wav.shape[0], frames), config.num_negatives, mask)
    mask = torch.tensor(mask, device=wav.device, dtype=torch.bool)
    negatives = torch.tensor(negatives, device=wav.device, dtype=torch.long)
    with autocast():
        loss = model(wav, mask_time_indices=mask, sampled_negative_indices=negatives).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def interleaved_throughputs(steps_and_models, wav, lengths, autocast, steps: int, warmup: int,
                            device) -> list:
    """Audio seconds per second of each (step, model), from the median of ``steps`` timed steps taken in
    turn (one of each, then again): a load change on the host hits both alike, so their ratio holds."""
    optimizers = [torch.optim.AdamW(model.parameters(), lr=1e-5) for _, model in steps_and_models]
    times = [[] for _ in steps_and_models]
    for index in range(warmup + steps):
        for (step, model), optimizer, taken in zip(steps_and_models, optimizers, times):
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            step(model, optimizer, wav, lengths, autocast)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if index >= warmup:
                taken.append(time.perf_counter() - start)
    audio = float(lengths.sum()) / RATE
    return [audio / statistics.median(taken) for taken in times]


def build_pair(config: Wav2Vec2Config, device):
    """speechkit's model and transformers' with the same weights."""
    import transformers

    torch.manual_seed(0)
    ours = Wav2Vec2Pretraining(config).to(device).train()
    theirs = transformers.Wav2Vec2ForPreTraining(
        transformers.Wav2Vec2Config(**config_to_huggingface(config, "Wav2Vec2ForPreTraining")))
    missing, unexpected = theirs.load_state_dict(state_dict_to_huggingface(ours), strict=False)
    if missing or unexpected:
        raise RuntimeError(f"weights do not map: missing {missing[:3]}, unexpected {unexpected[:3]}")
    return ours, theirs.to(device).train()


OBJECTIVES = ("wav2vec2", "hubert", "hubert+targets", "wavlm", "bestrq")
NUM_CLASSES = 100


class MaskedBatch:
    """The masks and targets both sides of a masked-prediction row share (drawn once per row)."""

    def __init__(self, model, wav, lengths):
        config = model.wav2vec2.config
        frame_lengths = model.wav2vec2.output_lengths(lengths).cpu()
        generator = torch.Generator().manual_seed(0)
        self.mask = span_mask(frame_lengths, int(frame_lengths.max()), config.mask_prob, config.mask_length,
                              config.mask_min_spans, generator).to(wav.device)
        self.targets = torch.randint(NUM_CLASSES, self.mask.shape, generator=generator).to(wav.device)


def hubert_step(batch: MaskedBatch, with_targets: bool = False):
    def step(model, optimizer, wav, lengths, autocast):
        with autocast():
            targets = None if with_targets else batch.targets
            loss = model(wav, lengths, targets=targets, mask=batch.mask).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def bestrq_step(batch: MaskedBatch):
    def step(model, optimizer, wav, lengths, autocast):
        with autocast():
            loss = model(wav, lengths, mask=batch.mask).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


class TransformersMaskedPrediction(torch.nn.Module):
    """A transformers encoder (``HubertModel``/``WavLMModel``) with speechkit's HuBERT head on top."""

    def __init__(self, encoder, head: HubertPretraining):
        super().__init__()
        # Copies of the head's weights: each side's optimizer updates its own.
        self.encoder, self.final_proj = encoder, copy.deepcopy(head.final_proj)
        self.label_embeddings = torch.nn.Parameter(head.label_embeddings.detach().clone())
        self.temperature = head.config.logit_temperature

    def forward(self, wav, mask, targets):
        hidden = self.encoder(wav, mask_time_indices=mask).last_hidden_state
        projected = torch.nn.functional.normalize(self.final_proj(hidden).float(), dim=-1, eps=1e-8)
        embeddings = torch.nn.functional.normalize(self.label_embeddings.float(), dim=-1, eps=1e-8)
        loss, _, count = masked_cross_entropy(projected @ embeddings.T / self.temperature, targets, mask)
        return loss / count.clamp(min=1)


def transformers_masked_step(batch: MaskedBatch):
    def step(model, optimizer, wav, lengths, autocast):
        with autocast():
            loss = model(wav, batch.mask, batch.targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def build_masked_pair(config: Wav2Vec2Config, family: str, device, wav, lengths):
    """speechkit's HuBERT model on ``family``'s encoder layout and transformers' encoder with its weights."""
    import transformers

    if family == "wavlm":
        config = config.replace(relative_position_buckets=320, relative_position_max_distance=800)
    torch.manual_seed(0)
    kmeans = MiniBatchKMeans(NUM_CLASSES, 39, seed=0)
    features, frames = mfcc_frames(wav.cpu(), lengths.cpu(), config)
    valid = torch.arange(features.shape[1])[None, :] < frames[:, None]
    kmeans.partial_fit(torch.cat([features[valid]] * (NUM_CLASSES // int(valid.sum()) + 1)))
    ours = HubertPretraining(config, NUM_CLASSES, ClusterTargets(kmeans, config)).to(device).train()
    architecture = "WavLMModel" if family == "wavlm" else "HubertModel"
    hf_config = encoder_config_to_huggingface(config, family, architecture)
    config_class = transformers.WavLMConfig if family == "wavlm" else transformers.HubertConfig
    encoder = getattr(transformers, architecture)(config_class(**hf_config))
    missing, unexpected = encoder.load_state_dict(encoder_state_to_huggingface(ours.wav2vec2.state_dict()),
                                                  strict=False)
    if missing or unexpected:
        raise RuntimeError(f"weights do not map: missing {missing[:3]}, unexpected {unexpected[:3]}")
    return ours, TransformersMaskedPrediction(encoder, ours).to(device).train()


def objective_rows(objective: str, config: Wav2Vec2Config, device, wav, lengths) -> tuple:
    """``(speechkit (step, model), transformers (step, model) or None)`` of one objective."""
    if objective == "wav2vec2":
        ours, theirs = build_pair(config, device)
        return (speechkit_step, ours), (transformers_step, theirs)
    if objective == "bestrq":
        torch.manual_seed(0)
        model = BestRqPretraining(config).to(device).train()
        return (bestrq_step(MaskedBatch(model, wav, lengths)), model), None
    family = "wavlm" if objective == "wavlm" else "hubert"
    ours, theirs = build_masked_pair(config, family, device, wav, lengths)
    batch = MaskedBatch(ours, wav, lengths)
    if objective == "hubert+targets":
        return (hubert_step(batch, with_targets=True), ours), None
    return (hubert_step(batch), ours), (transformers_masked_step(batch), theirs)


def main(argv=None) -> int:
    print(machine_line(), flush=True)  # the figures below are true of this machine
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="small,base", help="presets to measure (small, base, large)")
    parser.add_argument("--dtypes", default="fp32,bf16", help="fp32 and/or bf16 (autocast)")
    parser.add_argument("--objectives", default=",".join(OBJECTIVES),
                        help=f"any of {', '.join(OBJECTIVES)} (see the module doc)")
    parser.add_argument("--batch-seconds", type=float, default=20.0,
                        help="seconds of audio per batch (the pretraining recipe's max_tokens)")
    parser.add_argument("--utterance-seconds", type=float, default=4.0)
    parser.add_argument("--steps", type=int, default=5, help="timed steps of each, taken in turn")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tiny", action="store_true", help="a 1-layer model of width 32 (for the tests)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    wav, lengths = make_batch(args.batch_seconds, args.utterance_seconds, seed=0)
    wav, lengths = wav.to(device), lengths.to(device)
    print(f"# torch {torch.__version__}, {platform.machine()}, device {device}, {torch.get_num_threads()} "
          f"threads; batch {len(lengths)} x {args.utterance_seconds:g} s = {float(lengths.sum()) / RATE:.1f} "
          f"s of audio; median of {args.steps} steps taken in turn after {args.warmup}")
    objectives = args.objectives.split(",")
    unknown = sorted(set(objectives) - set(OBJECTIVES))
    if unknown:
        raise SystemExit(f"unknown objective {unknown[0]!r}: use {', '.join(OBJECTIVES)}")
    for dtype in args.dtypes.split(","):
        if dtype not in ("fp32", "bf16"):
            raise SystemExit(f"unknown dtype {dtype!r}: use fp32 or bf16")
    print("| objective | config | params | dtype | speechkit audio s/s | transformers audio s/s | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    rows = [(name, objective) for objective in objectives for name in args.configs.split(",")]
    for name, objective in rows:
        config = Wav2Vec2Config.preset(name)
        if args.tiny:
            config = config.replace(conv_channels=(32,) * 7, d_model=32, num_layers=1, num_heads=2,
                                    ffn_dim=64, pos_conv_kernel=8, pos_conv_groups=4, codebook_entries=8,
                                    codevector_dim=16, final_dim=16, num_negatives=10)
        ours, theirs = objective_rows(objective, config, device, wav, lengths)
        params = sum(p.numel() for p in ours[1].parameters() if p.requires_grad) / 1e6
        for dtype in args.dtypes.split(","):
            def autocast(dtype=dtype):
                if dtype == "fp32":
                    return contextlib.nullcontext()
                return torch.autocast(device.type, dtype=torch.bfloat16)

            pairs = (ours,) if theirs is None else (ours, theirs)
            rates = interleaved_throughputs(pairs, wav, lengths, autocast, args.steps, args.warmup, device)
            peer, ratio = (f"{rates[1]:.1f}", f"{rates[0] / rates[1]:.2f}") if theirs else ("-", "-")
            print(f"| {objective} | {name} | {params:.1f} M | {dtype} | {rates[0]:.1f} | {peer} | {ratio} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
