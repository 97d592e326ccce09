"""Shared test helpers (importable from any test module: pytest puts tests/ on sys.path)."""
import torch

from lib import MiniTransformer, ModelConfig


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
