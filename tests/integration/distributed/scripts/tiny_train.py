"""A tiny speechkit.Brain recipe for the distributed end-to-end tests (any launcher, CPU, gloo).

Usage: ``python tiny_train.py hp.yaml [run options] [--key value ...]`` where ``hp.yaml`` holds
``output_folder``, ``n_train``, ``n_test``, ``epochs``, ``batch_size``, ``mode`` (``fit`` | ``evaluate``) and
optional ``step_sleep``, ``fail_rank``, ``fail_step``, ``dynamic_batching``.

Every training batch appends its item ids to ``<output_folder>/seen/epoch<E>.rank<R>.pid<P>.txt`` and every
fit start appends a line to ``starts.jsonl`` (world size, epoch and position recovered), so tests can check
that a preempted and resumed epoch saw each item exactly once. ``evaluate`` writes ``eval.json`` (loss and the
ErrorRateStats summary) and the per-utterance report ``wer.txt`` from the main process.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

import speechkit
from speechkit import distributed as dist
from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.data.dataset import DynamicItemDataset
from speechkit.data.pipeline import provides, takes
from speechkit.stage import Stage


def build_dataset(count: int, prefix: str) -> DynamicItemDataset:
    """``count`` items of 3..15 frames of 4 features, a target value and a reference transcript."""
    data = {f"{prefix}{i:03d}": {"index": i, "duration": float(1 + (i * 7) % 5)} for i in range(count)}
    dataset = DynamicItemDataset(data)

    @takes("index", "duration")
    @provides("x", "y", "words")
    def make_item(index, duration):
        generator = torch.Generator().manual_seed(1000 + index)
        yield torch.randn(int(duration) * 3, 4, generator=generator)
        yield torch.tensor(float(index % 3))
        yield " ".join(f"w{(index + k) % 7}" for k in range(2 + index % 4))

    dataset.add_dynamic_item(make_item)
    dataset.set_output_keys(["id", "x", "y", "words"])
    return dataset


class TinyBrain(speechkit.Brain):
    def compute_forward(self, batch, stage):
        frames = self.modules.model(batch.x.data).squeeze(-1)  # (batch, time)
        lengths = batch.x.lengths
        valid = torch.arange(frames.shape[1], device=frames.device)[None, :] < lengths[:, None]
        scores = (frames * valid).sum(dim=1) / lengths  # (batch,): padding never enters
        if stage == Stage.TRAIN:
            self._on_train_batch(batch)
        return scores

    def compute_objectives(self, scores, batch, stage):
        if stage == Stage.TEST:
            hypotheses = [predicted_words(s, w) for s, w in zip(scores.tolist(), batch.words)]
            self.error_stats.append(batch.id, hypotheses, [w.split() for w in batch.words])
        return ((scores - batch.y.data) ** 2).mean()

    def _on_train_batch(self, batch) -> None:
        hp, ctx = self.hparams, self.context
        if ctx.rank == getattr(hp, "fail_rank", -1) and self.step == getattr(hp, "fail_step", 1):
            raise RuntimeError(f"injected failure at step {self.step}")
        seen = Path(hp.output_folder) / "seen"
        seen.mkdir(parents=True, exist_ok=True)
        name = f"epoch{self.epoch_counter.current}.rank{ctx.rank}.pid{os.getpid()}.txt"
        with open(seen / name, "a") as handle:
            handle.write(" ".join(batch.id) + "\n")  # one batch a line
        time.sleep(float(getattr(hp, "step_sleep", 0.0)))

    def on_fit_start(self):
        super().on_fit_start()
        record = {"rank": self.context.rank, "world_size": self.context.world_size,
                  "launcher": self.context.launcher, "epoch": self.epoch_counter.current,
                  "train_position": self.train_position, "restart": os.environ.get("SLURM_RESTART_COUNT")}
        with open(Path(self.hparams.output_folder) / "starts.jsonl", "a") as handle:
            handle.write(json.dumps(record) + "\n")

    def on_stage_start(self, stage, epoch=None):
        if stage == Stage.TEST:
            from speechkit.metrics import ErrorRateStats

            self.error_stats = ErrorRateStats()

    def on_stage_end(self, stage, stage_loss, epoch=None):
        if stage != Stage.TEST:
            return None
        summary = self.error_stats.summarize()
        folder = Path(self.hparams.output_folder)
        self.error_stats.write_stats(folder / "wer.txt") if dist.is_main() else None
        dist.run_on_main(lambda: (folder / "eval.json").write_text(json.dumps(
            {"loss": stage_loss, "summary": _plain(summary), "world_size": self.context.world_size})))
        return {"WER": summary["WER"] if isinstance(summary, dict) else summary}


def predicted_words(score: float, words: str) -> list:
    """A deterministic 'decoder' whose errors depend on the score (deletion, insertion, substitution)."""
    tokens = words.split()
    if score < -0.3:
        return tokens[:-1]
    if score > 0.3:
        return tokens + ["extra"]
    if score > 0.0:
        return ["sub"] + tokens[1:]
    return tokens


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor):
        return value.item()
    return value


def main(argv: list) -> None:
    hparams_file, run_opts, overrides = speechkit.parse_arguments(argv)
    hparams = speechkit.load_hparams(hparams_file, overrides)
    ctx = dist.init(run_opts)
    output = Path(hparams["output_folder"])
    dist.run_on_main(lambda: output.mkdir(parents=True, exist_ok=True))
    torch.manual_seed(0)  # the same initial weights on every rank and in every world size
    modules = {"model": torch.nn.Linear(4, 1)}
    loader_kwargs = {"batch_size": hparams["batch_size"]}
    if hparams.get("dynamic_batching"):
        loader_kwargs = {"dynamic_batching": dict(hparams["dynamic_batching"])}
    if hparams["mode"] == "fit":
        epochs = EpochCounter(int(hparams["epochs"]))
        checkpointer = Checkpointer(output / "save", {"model": modules["model"], "epoch_counter": epochs})
        brain = TinyBrain(modules, lambda params: torch.optim.SGD(params, lr=0.05), hparams, run_opts,
                          checkpointer)
        brain.fit(epochs, build_dataset(int(hparams["n_train"]), "tr"), train_loader_kwargs=loader_kwargs)
        dist.run_on_main(lambda: (output / f"done.{ctx.world_size}").write_text("ok"))
    else:
        brain = TinyBrain(modules, None, hparams, run_opts)
        brain.evaluate(build_dataset(int(hparams["n_test"]), "te"), test_loader_kwargs=loader_kwargs)


if __name__ == "__main__":
    main(sys.argv[1:])
