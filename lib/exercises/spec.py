"""Build-it exercises of notebook 07 (speculative decoding): the acceptance rule and the expected number of
tokens one target pass yields. The hidden cases come from ``lib.speculative`` and ``lib.sampling``."""
from __future__ import annotations

import torch

from . import Case, exercise
from ..sampling import residual_distribution
from ..speculative import acceptance_probability, expected_tokens_per_pass
from ..i18n import t


def acceptance_rule_solution(p: torch.Tensor, q: torch.Tensor, x: int):
    """(the chance to keep x, the distribution a rejection draws from): min(1, p(x)/q(x)), norm(max(0, p − q))."""
    keep = min(1.0, float(p[x]) / float(q[x]))
    residual = torch.clamp(p - q, min=0)
    residual = residual / residual.sum() if float(residual.sum()) > 0 else p.clone()  # p == q: never rejected
    return keep, residual


def _pair(seed: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(n, generator=g, dtype=torch.float64) * 2, -1)
    q = torch.softmax(torch.randn(n, generator=g, dtype=torch.float64) * 2, -1)
    return p, q


@exercise("acceptance_rule", title="The acceptance rule of speculative decoding",
          hints=("When the draft likes a token more than the target does, how often may that token be kept so "
                 "that what comes out follows the target's distribution?",
                 "Accept the proposed token with probability min(1, p/q); a rejection must make up exactly the "
                 "probability the acceptances left out: the positive part of p - q, normalised.",
                 "keep x with probability min(1, p[x] / q[x]); after a rejection the target draws from "
                 "max(0, p - q), divided by its sum so it adds up to 1 (and if p == q, nothing is left: use p)"),
          solution=acceptance_rule_solution)
def acceptance_rule_cases():
    p = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64)
    q = torch.tensor([0.2, 0.5, 0.1, 0.2], dtype=torch.float64)
    for x, what in ((1, "the draft proposes a token it likes more than the target does"),
                    (0, "the draft proposes a token the target likes more"),
                    (3, "the draft proposes a token the target never says")):
        yield Case(t("four tokens, {what}", what=t(what)), (p, q, x),
                   expected=(acceptance_probability(p, q, x), residual_distribution(p, q)))
    for seed in (1, 2):
        p, q = _pair(seed, 9)
        x = int(torch.argmax(q))
        yield Case(t("nine tokens, random distributions (seed {seed}), the draft's favourite proposed", seed=seed),
                   (p, q, x), expected=(acceptance_probability(p, q, x), residual_distribution(p, q)))
    p = torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64)
    yield Case(t("a draft that agrees exactly with the target"), (p, p.clone(), 2),
               expected=(acceptance_probability(p, p, 2), residual_distribution(p, p)))


def tokens_per_pass_solution(alpha: float, k: int) -> float:
    """1 + α + α² + … + α^k, which is (1 − α^(k+1)) / (1 − α) when α < 1."""
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


@exercise("tokens_per_pass", title="Expected tokens per target pass",
          hints=("How likely is it that the first i proposals are all kept, and how many tokens does the target "
                 "add of its own every round?",
                 "Add up, over i, the probability that the first i proposals are kept (a geometric series), plus "
                 "the one token the target always adds; at α = 1 the series' closed form divides by zero.",
                 "the first i proposals are all kept with probability α^i; the target always adds one token of its "
                 "own, so the expected count is 1 + α + α² + … + α^k (careful at α = 1)"),
          solution=tokens_per_pass_solution)
def tokens_per_pass_cases():
    return [Case(f"α = {a}, k = {k}" + (t(" (every proposal kept)") if a == 1 else ""), (a, k),
                 expected=expected_tokens_per_pass(a, k))
            for a, k in ((0.5, 1), (0.68, 4), (0.9, 6), (0.0, 3), (1.0, 4))]
