"""Training the real small language model (``lm``) and its draft (``lm-draft``) on real text in two languages.

    python -m lib.train_lm lm [--steps N] [--resume]       (make train MODEL=lm; about 85 min on 2 cores)

    text    Shakespeare (English) and Tang poems + Song ci (Chinese), prepared by ``python -m tools.corpus``
    tokens  one per character: newline, printable ASCII and the characters covering 99.5% of the text, + <unk>
    window  <s> at position 0, then 511 characters from a random line start of one language (half the batch
            English, half Chinese): the same first token in every window, as a real model's BOS
    mix     10% of windows carry a passage of their own text written a second time further on, 5% a string of
            random characters written twice: repeated passages are what in-context copying learns from, and a
            corpus this small has few of them (assets/README.md and the training record say what each did)
    step    next-token loss on all 512 positions at once (teacher forcing), AdamW (weight decay 0.1 on the
            matrices), warm-up then cosine decay, gradient clipping at 1.0; attention through PyTorch's fused
            ``scaled_dot_product_attention`` (same maths; the shipped config writes attention out again)

A run saves its state every ``--save-every`` steps under ``.cache/train/`` and ``--resume`` continues from it.
The finished weights go to ``assets/NAME.safetensors`` (fp16: half the bytes; loaded as fp32), with the whole
training record (loss curve, validation bits per character per language, wall time, CPU) in its metadata.
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from . import progress
from .config import ModelConfig
from .corpus import LANGUAGES, LM_CORPUS, encode_text, lm_vocabulary, read_split
from .demo import ASSETS, save_checkpoint
from .device import cpu_name
from .lm import window_bits
from .model import MiniTransformer
from .tokenizer import CharTokenizer

STATE = ASSETS.parent / ".cache" / "train"


@dataclass(frozen=True)
class LMSpec:
    config: dict  # ModelConfig fields except vocab_size
    steps: int
    batch: int = 8
    lr: float = 2e-3
    weight_decay: float = 0.1
    warmup: int = 200
    repeat_passage: float = 0.10  # share of windows with a passage of their own text written twice
    repeat_random: float = 0.05  # share of windows with a random string written twice
    seed: int = 0
    eval_every: int = 250


LM_SHAPE = dict(norm="rmsnorm", activation="swiglu", positions="rope", max_seq_len=512)
SPECS = {
    "lm": LMSpec(config=dict(n_layers=4, d_model=256, n_heads=4, **LM_SHAPE), steps=6000),
    # the draft for speculative decoding: same corpus, so the same vocabulary (lm_vocabulary is deterministic)
    "lm-draft": LMSpec(config=dict(n_layers=2, d_model=128, n_heads=2, **LM_SHAPE), steps=3000, lr=3e-3),
}


@dataclass
class Windows:
    """Training windows drawn from the tokenised text of both languages, reproducibly (one torch.Generator)."""

    tokens: dict  # lang -> 1-D LongTensor of the training text
    starts: dict  # lang -> positions where a line starts (with room for a whole window after them)
    T: int
    bos: int
    vocab_size: int
    spec: LMSpec
    gen: torch.Generator = field(default_factory=torch.Generator)

    @classmethod
    def build(cls, tokenizer: CharTokenizer, texts: dict, T: int, spec: LMSpec) -> "Windows":
        tokens = {lang: torch.tensor(encode_text(tokenizer, text)) for lang, text in texts.items()}
        nl = tokenizer.stoi["\n"]
        starts = {lang: (t[:-T] == nl).nonzero().flatten() + 1 for lang, t in tokens.items()}
        w = cls(tokens, starts, T, tokenizer.bos_id, tokenizer.vocab_size, spec)
        w.gen.manual_seed(spec.seed)
        return w

    def _int(self, low: int, high: int) -> int:  # one integer in [low, high)
        return int(torch.randint(low, high, (1,), generator=self.gen))

    def window(self, lang: str) -> torch.Tensor:
        """(T + 1,) token ids: <s>, then T characters of ``lang`` from a line start (maybe with a repeat)."""
        s = int(self.starts[lang][self._int(0, len(self.starts[lang]))])
        x = torch.cat([torch.tensor([self.bos]), self.tokens[lang][s:s + self.T]])
        r = float(torch.rand(1, generator=self.gen))
        if r < self.spec.repeat_passage + self.spec.repeat_random:
            n = self._int(16, 129)  # the repeated span's length
            i = self._int(1, self.T - 2 * n)
            if r < self.spec.repeat_passage:  # a passage of this window, written again later in it
                j = self._int(i + n, self.T + 1 - n)
                x[j:j + n] = x[i:i + n].clone()
            else:  # random characters (never a special token), twice in a row
                rnd = torch.randint(4, self.vocab_size, (n,), generator=self.gen)
                x[i:i + n], x[i + n:i + 2 * n] = rnd, rnd
        return x

    def batch(self, size: int) -> torch.Tensor:
        """(size, T + 1): half the rows English, half Chinese."""
        return torch.stack([self.window(LANGUAGES[i % len(LANGUAGES)]) for i in range(size)])


def lr_at(spec: LMSpec, step: int) -> float:
    """Linear warm-up to ``spec.lr``, then cosine decay to a tenth of it at ``spec.steps``."""
    warm = min(1.0, (step + 1) / spec.warmup)
    done = min(1.0, step / spec.steps)
    return spec.lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done)))


def make_optimizer(model: MiniTransformer, spec: LMSpec) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices (embeddings, projections) only, not on the norms' gains."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    keep = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": spec.weight_decay},
                              {"params": keep, "weight_decay": 0.0}], lr=spec.lr, betas=(0.9, 0.95))


def val_windows(tokenizer: CharTokenizer, texts: dict, T: int, n: int = 16, seed: int = 123) -> dict:
    """lang -> (n, T) fixed windows of held-out text, each <s> + T - 1 characters from a line start."""
    gen, out = torch.Generator().manual_seed(seed), {}
    for lang, text in texts.items():
        ids = torch.tensor(encode_text(tokenizer, text))
        starts = (ids[:-T] == tokenizer.stoi["\n"]).nonzero().flatten() + 1
        pick = starts[torch.randint(len(starts), (n,), generator=gen)]
        out[lang] = torch.stack([torch.cat([torch.tensor([tokenizer.bos_id]), ids[s:s + T - 1]]) for s in pick])
    return out


def train_step(model, opt, x: torch.Tensor, lr: float) -> float:
    for group in opt.param_groups:
        group["lr"] = lr
    logits = model(x[:, :-1])  # (B, T, vocab): every position predicts the next token at once
    loss = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def evaluate(model, val: dict) -> dict:
    model.eval()
    out = {lang: round(window_bits(model, w), 4) for lang, w in val.items()}
    model.train()
    return out


def save_state(path: Path, model, opt, windows: Windows, step: int, record: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(dict(model=model.state_dict(), opt=opt.state_dict(), gen=windows.gen.get_state(), step=step,
                    record=record), path)


def train_lm(name: str, steps: int | None = None, resume: bool = False, save_every: int = 250,
             corpus=None, threads: int | None = None, verbose: bool = True):
    """Train ``name`` ("lm" or "lm-draft") -> (model with written-out attention, tokenizer, training record)."""
    spec = SPECS[name]
    if steps is not None:
        spec = LMSpec(**{**asdict(spec), "steps": steps})
    if threads:
        torch.set_num_threads(threads)
    texts = {lang: read_split(lang, "train", corpus) for lang in LANGUAGES}
    tokenizer = lm_vocabulary(texts.values())
    torch.manual_seed(spec.seed)
    shipped = ModelConfig(vocab_size=tokenizer.vocab_size, **spec.config)
    model = MiniTransformer(shipped.replace(attn_impl="sdpa"))  # the same maths, fused: faster to train
    T = shipped.max_seq_len
    windows = Windows.build(tokenizer, texts, T, spec)
    val = val_windows(tokenizer, {lang: read_split(lang, "val", corpus) for lang in LANGUAGES}, T)
    opt = make_optimizer(model, spec)
    record = dict(losses=[], val=[], seconds=0.0)
    state_path, start = STATE / f"{name}.pt", 0
    if resume and state_path.is_file():
        state = torch.load(state_path, weights_only=False)
        model.load_state_dict(state["model"]), opt.load_state_dict(state["opt"]), windows.gen.set_state(state["gen"])
        start, record = state["step"], state["record"]
        print(f"[{name}] resuming at step {start}")
    model.train()
    run, resumed_with = [], record["seconds"]  # the log's s/step counts this session's steps only
    with progress.bar(total=spec.steps, initial=start, desc=name, unit="step", show=None if verbose else False) as bar:
        for step in range(start, spec.steps):
            t0 = time.perf_counter()
            run.append(train_step(model, opt, windows.batch(spec.batch), lr_at(spec, step)))
            record["seconds"] += time.perf_counter() - t0
            if len(run) == 25 or step == spec.steps - 1:
                record["losses"].append([step + 1, round(sum(run) / len(run), 4)])
                run = []
                if bar.disable and (step + 1) % 50 == 0:  # a log line now and then where no bar is drawn
                    print(f"[{name}] step {step + 1} loss {record['losses'][-1][1]:.4f} "
                          f"({(record['seconds'] - resumed_with) / (step + 1 - start):.2f} s/step)", flush=True)
            if (step + 1) % spec.eval_every == 0 or step == spec.steps - 1:
                record["val"].append([step + 1, evaluate(model, val)])
                latest = record["losses"][-1][1] if record["losses"] else sum(run) / len(run)
                line = f"[{name}] step {step + 1} loss {latest:.4f} val bits/char {record['val'][-1][1]}"
                progress.write(line) if not bar.disable else print(line, flush=True)
            if (step + 1) % save_every == 0 or step == spec.steps - 1:
                save_state(state_path, model, opt, windows, step + 1, record)
                save_checkpoint(trained(model, shipped), tokenizer, STATE / f"{name}-{step + 1}.safetensors",
                                dtype=torch.float16)
            bar.update()
    info = dict(name=name, command=f"python -m lib.train_lm {name}", spec=asdict(spec), torch=torch.__version__,
                threads=torch.get_num_threads(), cpu=cpu_name(), seconds=round(record["seconds"], 1),
                losses=record["losses"], val_bits_per_char=record["val"], parameters=model.num_parameters())
    return trained(model, shipped), tokenizer, info


def trained(model: MiniTransformer, shipped: ModelConfig) -> MiniTransformer:
    """A copy of ``model`` with the shipped config (attention written out, so its weights can be shown)."""
    out = MiniTransformer(shipped)
    out.load_state_dict(model.state_dict())
    return out.eval()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lib.train_lm", description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=list(SPECS))
    parser.add_argument("--steps", type=int, default=None, help="train this many steps instead of the spec's")
    parser.add_argument("--resume", action="store_true", help=f"continue from {STATE}/NAME.pt if it is there")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--save-every", type=int, default=250)
    parser.add_argument("--corpus", type=Path, default=LM_CORPUS)
    parser.add_argument("--out", type=Path, default=None, help="where the weights go (default assets/NAME.safetensors)")
    args = parser.parse_args(argv)
    model, tokenizer, info = train_lm(args.name, args.steps, args.resume, args.save_every, args.corpus, args.threads)
    path = save_checkpoint(model, tokenizer, args.out or ASSETS / f"{args.name}.safetensors", dtype=torch.float16, **info)
    print(f"[{args.name}] {info['parameters']:,} parameters, {info['seconds'] / 60:.1f} min; wrote {path} "
          f"({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
