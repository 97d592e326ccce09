"""Train the shipped demo models: ``python -m lib.train [chat|draft|tiny|chat-gqa|all]``.

Training is next-token prediction on ``assets/corpus.txt`` (``lib.corpus``: each line is one sample, ``<s>`` +
line + ``<eos>``), full batch, AdamW, a fixed seed, one CPU thread and deterministic kernels, so the same command
gives bit-identical weights on the same machine and torch build. On another CPU family (or BLAS) the rounding
differs and the weights with it (in the third decimal), but not what the model learned: the same greedy phrases
and the same final loss within 2% (``tests/test_demo.py``). Every sample's positions are predicted in one causal
forward pass (teacher forcing) — the parallel training pass that inference cannot use.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import progress
from .config import ModelConfig
from .corpus import corpus_tokenizer, read_corpus
from .demo import demo_path, save_checkpoint
from .model import MiniTransformer
from .tokenizer import CharTokenizer


@dataclass
class DemoSpec:
    config: dict  # ModelConfig fields except vocab_size (taken from the tokenizer)
    lines: list | None  # the corpus lines it learns (None: all of corpus.txt)
    steps: int
    lr: float
    expect: dict  # prompt -> the greedy continuation it must produce
    seed: int = 0


EXPECT_CHAT = {
    "<s>": "人工智能<eos>",
    "<s>深": "度学习<eos>",
    "<s>hello": " world<eos>",
    "<s>the cat": " sat on the mat<eos>",
    "<s>attention": " is all you need<eos>",
}

SPECS = {
    "chat": DemoSpec(config=dict(n_layers=4, d_model=64, n_heads=4, max_seq_len=64),
                     lines=None, steps=600, lr=3e-3, expect=EXPECT_CHAT),
    "draft": DemoSpec(config=dict(n_layers=1, d_model=32, n_heads=2, max_seq_len=64),
                      lines=None, steps=600, lr=5e-3, expect=EXPECT_CHAT),
    "tiny": DemoSpec(config=dict(n_layers=2, d_model=4, n_heads=1, d_ff=16, max_seq_len=16, tie_embeddings=False),
                     lines=["深度学习"], steps=800, lr=2e-2, expect={"<s>": "深度学习<eos>"}),
    # chat's shape with grouped-query attention: 4 query heads share 2 K/V heads, so half of chat's cache
    "chat-gqa": DemoSpec(config=dict(n_layers=4, d_model=64, n_heads=4, n_kv_heads=2, max_seq_len=64),
                    lines=None, steps=600, lr=3e-3, expect=EXPECT_CHAT),
}


def make_batch(tokenizer: CharTokenizer, lines: list[str]):
    """(inputs, targets): each sample is <s> line <eos>, padded; padded targets are -100 (ignored)."""
    seqs = [tokenizer.encode("<s>" + line + "<eos>") for line in lines]
    T = max(len(s) for s in seqs) - 1
    x = torch.full((len(seqs), T), tokenizer.pad_id, dtype=torch.long)
    y = torch.full((len(seqs), T), -100, dtype=torch.long)
    for i, s in enumerate(seqs):
        x[i, :len(s) - 1] = torch.tensor(s[:-1])
        y[i, :len(s) - 1] = torch.tensor(s[1:])
    return x, y


def greedy_continuation(model, tokenizer, prompt: str, max_new_tokens: int = 24) -> str:
    from .generate import generate
    ids = tokenizer.encode(prompt)
    n = min(max_new_tokens, model.config.max_seq_len - len(ids) + 1)
    out = generate(model, ids, n, eos_id=tokenizer.eos_id).sequences[0, len(ids):]
    return tokenizer.decode(out)


def train(name: str, verbose: bool = True, steps: int | None = None):
    """Train one demo model from scratch; returns (model, tokenizer, info). ``steps`` stops the recipe early (a
    test of the loop itself, its bar and its lines, need not wait for the full run): the phrases are then not
    checked, and ``info`` says how many steps ran."""
    if name not in SPECS:
        raise ValueError(f"unknown demo {name!r}; the demos are: {', '.join(SPECS)}")
    spec = SPECS[name]
    if steps is not None:
        from .checks import integer
        steps = integer(steps, "steps", 1, spec.steps)
    n_steps = spec.steps if steps is None else steps
    tokenizer = corpus_tokenizer()
    lines = spec.lines if spec.lines is not None else read_corpus()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        torch.manual_seed(spec.seed)
        config = ModelConfig(vocab_size=tokenizer.vocab_size, **spec.config)
        model = MiniTransformer(config)
        x, y = make_batch(tokenizer, lines)
        opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=spec.steps, eta_min=spec.lr / 10)
        t0 = time.perf_counter()
        model.train()
        # a bar with the loss on a terminal (lib.progress); the plain loss lines in a log or under CI
        with progress.bar(total=n_steps, desc=name, unit="step", show=None if verbose else False) as bar:
            for step in range(n_steps):
                logits = model(x)  # one causal forward over every position of every sample
                loss = F.cross_entropy(logits.reshape(-1, config.vocab_size), y.reshape(-1), ignore_index=-100)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                if not bar.disable:
                    bar.set_postfix(loss=f"{loss.item():.4f}", refresh=False)
                    bar.update()
                elif verbose and (step % 100 == 0 or step == n_steps - 1):
                    print(f"[{name}] step {step:4d}  loss {loss.item():.4f}")
        seconds = time.perf_counter() - t0
        model.eval()
    finally:
        torch.use_deterministic_algorithms(False)
        torch.set_num_threads(threads)
    got = {p: greedy_continuation(model, tokenizer, p) for p in spec.expect}
    wrong = {p: (got[p], e) for p, e in spec.expect.items() if got[p] != e}
    if wrong and steps is None:
        raise RuntimeError(f"{name}: training did not reach its phrases (prompt: (got, expected)): {wrong}")
    info = dict(name=name, command=f"python -m lib.train {name}", steps=n_steps, lr=spec.lr, seed=spec.seed,
                final_loss=round(loss.item(), 6), n_samples=len(lines), torch=torch.__version__,
                expect=spec.expect)
    if verbose:
        print(f"[{name}] {model.num_parameters():,} parameters, {seconds:.1f} s; greedy: {got}")
    return model, tokenizer, info


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lib.train", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=["all"], choices=list(SPECS) + ["all"],
                        help="which toy model(s) to train (default: all four; the real model: python -m lib.train_lm)")
    args = parser.parse_args(argv)
    names = list(SPECS) if "all" in args.names else args.names
    for name in names:
        model, tokenizer, info = train(name)
        path = save_checkpoint(model, tokenizer, demo_path(name), **info)
        print(f"[{name}] wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
