"""Shared test helpers (importable from any test module: pytest puts tests/ on sys.path)."""
import contextlib
import signal

import torch

from lib import MiniTransformer, ModelConfig

ATOL = 1e-5  # fp32 CPU: cached and uncached logits agree to this (design.md)

# Every switch of ModelConfig that changes what the forward pass computes, each in at least one variant;
# the tests of every cache, of FastDecoder and of generation run over all of them.
VARIANTS = {
    "mha-learned-layernorm-gelu": dict(n_heads=4, n_kv_heads=4, positions="learned", norm="layernorm", activation="gelu"),
    "gqa-rope-rmsnorm-swiglu": dict(n_heads=4, n_kv_heads=2, positions="rope", norm="rmsnorm", activation="swiglu",
                                    bias=False),
    "mqa-rope-layernorm-silu": dict(n_heads=4, n_kv_heads=1, positions="rope", norm="layernorm", activation="silu"),
    "mha-rope-untied-gelu_tanh": dict(n_heads=2, positions="rope", activation="gelu_tanh", tie_embeddings=False),
    "gqa-learned-qkvbias": dict(n_heads=4, n_kv_heads=2, bias=False, qkv_bias=True),
    "odd-sizes": dict(vocab_size=53, d_model=30, n_heads=3, d_ff=50),  # nothing divides by 2 or 4
    "head_dim-not-d_model/heads-sdpa": dict(n_heads=4, n_kv_heads=2, head_dim=6, positions="rope", attn_impl="sdpa"),
}


def randomized_model(seed=0, scale=0.3, **config) -> MiniTransformer:
    """A small model whose every parameter is re-drawn from N(0, scale²), in eval mode.

    Re-randomising matters: the default init zeroes biases and sets norm weights to 1, which hides bugs
    (a dropped bias, swapped norms); a larger scale also separates the argmax, so greedy runs are stable."""
    torch.manual_seed(seed)
    cfg = dict(vocab_size=50, n_layers=2, d_model=32, n_heads=4, max_seq_len=24)
    cfg.update(config)
    model = MiniTransformer(ModelConfig(**cfg)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * scale)
    return model


def make_model(seed=0, **config) -> MiniTransformer:
    """``randomized_model`` with a 40-token context window (room for long prompts plus generation)."""
    return randomized_model(seed, **{"max_seq_len": 40, **config})


SMALL_GQA = ModelConfig(vocab_size=30, n_layers=3, d_model=16, n_heads=4, n_kv_heads=2, max_seq_len=40,
                        positions="rope")


def small_gqa_model() -> MiniTransformer:
    """A 3-layer GQA model with rotary positions (default init, seed 1), for tests of the loop and its trace."""
    torch.manual_seed(1)
    return MiniTransformer(SMALL_GQA).eval()


def drawn_without_missing_glyphs(make_figure):
    """``make_figure()`` drawn with the lab's CJK font, any warning an error ("Glyph ... missing from font(s)"
    is a UserWarning): returns the drawn figure."""
    import warnings

    from lib.widgets.fonts import use_cjk_font

    use_cjk_font()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = make_figure()
        fig.canvas.draw()
    return fig


class Hang(AssertionError):
    """A call that did not return within its time bound."""


@contextlib.contextmanager
def time_bound(seconds: float, what: str = "the call"):
    """Fail (``Hang``) instead of hanging when the body runs longer than ``seconds``: SIGALRM interrupts a
    Python loop that spins. Main thread only (pytest and its xdist workers run tests there)."""
    def expire(signum, frame):
        raise Hang(f"{what} did not return within {seconds} s: it hangs")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def opted_in(config, folder, variable: str) -> bool:
    """Whether a slow suite in ``folder`` runs: ``variable`` is "1", or pytest was pointed at the folder (or a file
    or test in it) by path. ``make test`` collects ``tests/`` as a whole, so there it stays off unless asked for."""
    import os
    from pathlib import Path

    if os.environ.get(variable) == "1":
        return True
    folder = Path(folder).resolve()
    for arg in config.invocation_params.args:
        path = Path(str(arg).split("::")[0])
        path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
        if path.exists() and (path.resolve() == folder or folder in path.resolve().parents):
            return True
    return False
