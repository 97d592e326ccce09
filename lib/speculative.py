"""Speculative decoding: a small draft model guesses k tokens, the target model checks all of them at once.

Autoregressive decoding is serial: one forward pass of the (large) target model per new token. Speculative
decoding (Leviathan et al. 2023, Chen et al. 2023) keeps the target's output but needs fewer of its passes:

    one round (one_round):
      1. propose: the draft proposes x1..xk, one token at a time (k cheap forward passes, its own KV cache)
      2. verify:  the target runs ONE forward pass over [pending token, x1..xk] with its KV cache: k + 1
                  positions, so it gets its own next-token distribution p after every prefix at once
      3. accept:  keep a prefix of the proposals, then append one token of the target's own (a correction
                  after a rejection, or a bonus token when all k were kept): every round yields 1 .. k + 1 tokens
      4. roll back: crop both caches back to the accepted text (``KVCache.crop``)

Greedy: x_i is accepted when it equals the target's argmax, so the text is exactly what the target alone
would write. Sampling: x_i ~ q is accepted with probability min(1, p(x_i)/q(x_i)); on rejection the target's
token is drawn from norm(max(0, p - q)) (``accept_or_resample``, the one rule the loop calls). Then every emitted token is distributed exactly as p: a draft changes
only the speed, never the output distribution (``output_distribution`` shows it on numbers).

The draft need not be a model. ``PromptLookup`` (vLLM's n-gram proposer, "prompt lookup decoding") proposes the
tokens that followed the last few tokens' earlier occurrence in the text itself: no draft model, no draft cache,
free proposals, and α as high as the text repeats itself (and the target copies it). Its q is one token for sure,
so the same acceptance rule keeps x with probability p(x) and the output distribution is still exactly p.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import torch

from .cache import KVCache
from . import checks, progress
from .memo import memoised
from .i18n import say
from .model import eval_mode
from .sampling import choose, draw, make_generator, residual_distribution as _residual, sampling_probs
from .text import text_table

# ------------------------------------------------------------------------------- the acceptance rule


def _check_pair(p: torch.Tensor, q: torch.Tensor):
    checks.probabilities(p, "p"), checks.probabilities(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must be over the same vocabulary, got {p.numel()} and {q.numel()} entries")


def acceptance_probability(p: torch.Tensor, q: torch.Tensor, x: int) -> float:
    """min(1, p(x) / q(x)): the chance of keeping a draft token x that was drawn from q (q(x) > 0)."""
    _check_pair(p, q)
    allowed = f"a token the draft can propose (an integer from 0 to {q.numel() - 1} with q(x) > 0)"
    x = checks.integer(x, "x", 0, q.numel() - 1, allowed=allowed)
    if float(q[x]) <= 0:
        raise ValueError(f"x must be {allowed}, got {x} with q(x) = 0")
    return min(1.0, float(p[x]) / float(q[x]))


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)): where the target's token comes from after a rejection. It puts mass only on
    tokens the draft proposes too rarely. If p == q there is nothing left (and no rejection ever happens):
    then p itself is returned."""
    _check_pair(p, q)
    return _residual(p, q)  # lib.sampling's rule, the one the loop below draws with


def expected_acceptance(p: torch.Tensor, q: torch.Tensor) -> float:
    """Probability that one draft token is accepted: sum_x q(x) min(1, p(x)/q(x)) = sum_x min(p(x), q(x))."""
    _check_pair(p, q)
    return float(torch.minimum(p.double(), q.double()).sum())


def output_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Exact distribution of the token the rule emits at one position: accepted draft tokens
    q(x) min(1, p(x)/q(x)) plus rejections (1 - acceptance) times the residual. It equals p."""
    _check_pair(p, q)
    p64, q64 = p.double(), q.double()
    accepted = torch.minimum(p64, q64)  # q(x) * min(1, p(x)/q(x))
    rejected = 1.0 - float(accepted.sum())
    return accepted + rejected * residual_distribution(p64, q64)


def accept_or_resample(p: torch.Tensor, q: torch.Tensor, x: int, generator: torch.Generator | None = None):
    """One step of the rule: keep x with probability min(1, p(x)/q(x)) -> (True, x); otherwise draw a token
    from the residual -> (False, token)."""
    a = acceptance_probability(p, q, x)  # checks p, q and x
    u = float(torch.rand((), generator=generator, device=p.device))
    if u < a:
        return True, x
    return False, int(draw(_residual(p, q)[None], generator))


# ------------------------------------------------------------------------- by the numbers: α, k and c


def _check_alpha_k(alpha, k) -> tuple[float, int]:
    alpha = checks.number(alpha, "alpha (the chance that one draft token is accepted)", 0, 1)
    k = checks.integer(k, "k (draft tokens proposed per round)", 1)
    return alpha, k


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """Expected tokens one target pass yields when each of the k proposals is accepted independently with
    probability ``alpha`` (Leviathan et al. 2023, eq. 1): the kept prefix has length i < k with probability
    α^i (1 − α), all k are kept with probability α^k, and the target adds one token of its own either way:

        E[tokens per pass] = 1 + α + α² + … + α^k = (1 − α^(k+1)) / (1 − α)      (k + 1 when α = 1)
    """
    alpha, k = _check_alpha_k(alpha, k)
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def expected_speedup(alpha: float, k: int, c: float) -> float:
    """Expected wall-time speed-up over the target alone (Leviathan et al. 2023, Theorem 3.8) when a draft pass
    costs ``c`` target passes and a target pass over k + 1 tokens costs as much as one over a single token
    (true while decoding is memory-bound): a round costs k·c + 1 target-pass times and yields
    ``expected_tokens_per_pass(alpha, k)`` tokens, so

        speed-up = (1 − α^(k+1)) / ((1 − α)(k·c + 1))
    """
    c = checks.number(c, "c (the cost of one draft pass, in target passes)", 0)
    return expected_tokens_per_pass(alpha, k) / (k * c + 1)


def implied_alpha(tokens_per_pass: float, k: int) -> float:
    """The α at which ``expected_tokens_per_pass(α, k)`` equals ``tokens_per_pass`` (between 1 and k + 1):
    the formula inverted by bisection (it rises strictly with α)."""
    k = checks.integer(k, "k (draft tokens proposed per round)", 1)
    t = checks.number(tokens_per_pass, "tokens_per_pass", 1, k + 1,
                      allowed=f"a number from 1 to k + 1 = {k + 1} (one round yields 1 to k + 1 tokens)")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens_per_pass(mid, k) < t else (lo, mid)
    return (lo + hi) / 2


# ----------------------------------------------------------------------------------------- a run's record


@dataclass
class SpeculativeRound:
    """One draft-then-verify round (plain data: ints, floats, lists)."""

    index: int
    start: int  # sequence length before the round
    target_fed: int  # tokens in the target's one verification pass (pending + proposals)
    proposed: list  # the draft's tokens x1..xk (k may be smaller near max_new_tokens or after an <eos>)
    q: list  # q(x_i): the draft's probability of each proposal (sampling distribution; temperature 1 if greedy)
    p: list  # p(x_i): the target's probability of the same token
    accept_prob: list  # min(1, p/q) when sampling; 1.0 / 0.0 (equals the target's argmax or not) when greedy
    accepted: int  # how many proposals were kept (a prefix)
    target_token: int  # the target's own token after the kept prefix
    kind: str  # "correction" (after a rejection), "bonus" (all proposals kept) or "target" (nothing proposed)
    emitted: list  # tokens appended this round (kept prefix + target token, cut after an <eos>)
    draft_passes: int
    alpha: list = field(default_factory=list)  # per decided proposal (as accept_prob): the chance it is kept,
    # sum_x min(p(x), q(x)) = 1 - TV(p, q) when sampling; 1.0 / 0.0 (the argmaxes agree or not) when greedy

    @property
    def rejected(self) -> int:
        """Proposals that did not make it (the first rejected one and every one after it)."""
        return len(self.proposed) - self.accepted

    @property
    def target_emitted(self) -> bool:
        """Whether the target's own token made it into the text (not when a kept <eos> ended it first)."""
        return len(self.emitted) == self.accepted + 1


@dataclass
class SpeculativeResult:
    sequences: torch.Tensor  # (1, prompt_len + generated): prompt followed by the new tokens, like generate()
    prompt_len: int
    k: int
    sampling: dict  # temperature, top_k, top_p, seed
    rounds: list = field(default_factory=list)  # SpeculativeRound per target pass
    target_forwards: int = 0
    draft_forwards: int = 0
    target_cache: KVCache | None = None  # holds the sequence minus its last token (like generate's cache)
    draft_cache: KVCache | None = None  # may lag a few tokens: it is fed them at its next proposal

    @property
    def new_tokens(self) -> torch.Tensor:
        return self.sequences[:, self.prompt_len:]

    @property
    def n_new(self) -> int:
        return self.sequences.shape[1] - self.prompt_len

    @property
    def n_proposed(self) -> int:
        return sum(len(r.proposed) for r in self.rounds)

    @property
    def n_accepted(self) -> int:
        return sum(r.accepted for r in self.rounds)

    @property
    def acceptance_rate(self) -> float:
        """Fraction of drafts kept: kept proposals / proposals (0.0 when nothing was proposed). Not the
        per-token acceptance rate α: proposals after a rejection are dropped unchecked and count as not kept."""
        return self.n_accepted / self.n_proposed if self.n_proposed else 0.0

    @property
    def full_rounds(self) -> list:
        """The rounds in which the draft proposed all k tokens and the text went on: the rounds the formula
        ``expected_tokens_per_pass`` describes (the others were cut short by max_new_tokens or an <eos>)."""
        return [r for r in self.rounds if len(r.proposed) == self.k and r.target_emitted]

    @property
    def n_decided(self) -> int:
        """Proposals the target decided on: the kept ones and the first rejected one of each round."""
        return sum(len(r.alpha) for r in self.rounds)

    @property
    def alpha(self) -> float | None:
        """The measured per-token acceptance rate α of Leviathan et al.: the mean over decided proposals of the
        chance each had to be kept, E[min(1, p/q)] = sum_x min(p(x), q(x)) = 1 − TV(p, q) (greedy: whether the
        two argmaxes agree). None when nothing was proposed."""
        return sum(a for r in self.rounds for a in r.alpha) / self.n_decided if self.n_decided else None

    @property
    def baseline_target_forwards(self) -> int:
        """Target passes plain ``generate`` needs for the same new tokens: one per token (prefill included)."""
        return self.n_new

    @property
    def tokens_per_target_pass(self) -> float:
        return self.n_new / self.target_forwards

    def rows(self, tokenizer=None) -> list[dict]:
        """One dict per round, ready for a table."""
        show = (lambda ids: tokenizer.decode(ids)) if tokenizer is not None else (lambda ids: str(list(ids)))
        out, total = [], 0
        for r in self.rounds:
            total += len(r.emitted)
            out.append({
                "round": r.index,
                "proposed": show(r.proposed) if r.proposed else "-",
                "kept": f"{r.accepted}/{len(r.proposed)}",
                "target": f"{show([r.target_token])} ({r.kind})" if r.target_emitted else "- (text ended at <eos>)",
                "emitted": show(r.emitted),
                "new so far": total,
            })
        return out

    def table(self, tokenizer=None) -> str:
        """The rows as an aligned text table."""
        return text_table(self.rows(tokenizer), translate=True) if self.rounds else "(no rounds)"

    def summary(self) -> str:
        """One line: tokens, target passes (vs one per token), draft passes, acceptance (in the current
        language, ``lib.i18n.say``)."""
        return say(f"{self.n_new} new tokens in {self.target_forwards} target passes (generate: "
                   f"{self.baseline_target_forwards}) + {self.draft_forwards} draft passes; "
                   f"{self.n_accepted}/{self.n_proposed} proposals kept ({self.acceptance_rate:.1%}), "
                   f"{self.tokens_per_target_pass:.2f} tokens per target pass")


# ----------------------------------------------------------------------------------------------- the loop


@dataclass(frozen=True)
class PromptLookup:
    """A draft without a model: vLLM's n-gram proposer (``speculative_config={"method": "ngram",
    "prompt_lookup_min": min_n, "prompt_lookup_max": max_n}``). It looks for the longest n-gram, max_n down to
    min_n tokens, that ends the text and occurred before, and proposes the k tokens that followed its earliest
    occurrence (fewer where the text ends first; none where no n-gram matches)."""

    min_n: int = 1
    max_n: int = 3

    def __post_init__(self):
        checks.integer(self.min_n, "min_n", 1)
        checks.integer(self.max_n, "max_n", self.min_n, allowed=f"an integer >= min_n ({self.min_n})")

    def propose(self, tokens: list[int], k: int) -> list[int]:
        """Up to ``k`` tokens copied from after the earliest earlier occurrence of the text's longest matching end."""
        for n in range(min(self.max_n, len(tokens) - 1), self.min_n - 1, -1):
            end = tokens[-n:]
            for start in range(len(tokens) - n):  # earliest first, as vLLM; the end itself is not a match
                if tokens[start:start + n] == end:
                    return tokens[start + n:start + n + k]
        return []


def _check_run(target, draft, input_ids, max_new_tokens, k, temperature, top_k, top_p, eos_id) -> tuple:
    """speculative_generate's arguments, checked -> (input_ids (1, T) on the target's device, k)."""
    input_ids = checks.generate_args(target, input_ids, max_new_tokens, temperature, top_k, top_p, eos_id)
    k = checks.integer(k, "k (draft tokens proposed per round)", 1)
    if isinstance(draft, PromptLookup):
        if input_ids.shape[0] != 1:
            raise ValueError(f"speculative_generate handles one sequence at a time (batch size 1), got a batch of "
                             f"{input_ids.shape[0]}")
        return input_ids, k
    if not all(hasattr(draft, a) for a in ("config", "device", "dtype")):
        raise TypeError(f"draft must be a model (lib.MiniTransformer or lib.FastDecoder), got {type(draft).__name__}")
    tv, dv = target.config.vocab_size, draft.config.vocab_size
    if tv != dv:
        raise ValueError(f"the draft and the target must share a vocabulary (the same tokenizer): the target has "
                         f"{tv} tokens, the draft {dv}; a draft token id must mean the same token to both")
    if draft.device != target.device:
        raise ValueError(f"the draft is on {draft.device} but the target is on {target.device}; "
                         f"put both models on the same device")
    B, prompt_len = input_ids.shape
    if B != 1:
        raise ValueError(f"speculative_generate handles one sequence at a time (batch size 1), got a batch of {B}: "
                         f"each sequence keeps a different number of draft tokens per round, so call it once "
                         f"per prompt")
    need = prompt_len + max_new_tokens - 1  # longest sequence either model is ever fed
    if need > draft.config.max_seq_len:
        raise ValueError(f"the draft's context window is too short: a prompt of {prompt_len} tokens plus "
                         f"max_new_tokens={max_new_tokens} needs {need} positions, the draft has "
                         f"max_seq_len={draft.config.max_seq_len}")
    return input_ids, k


@dataclass
class _Pair:
    """What every round of one speculative_generate call uses: both models, their caches, the sampling."""

    target: object
    draft: object
    t_cache: KVCache  # holds the text minus its last token after every round
    d_cache: KVCache | None  # may lag a few tokens: it is fed them at its next proposal (None: PromptLookup)
    temperature: float
    top_k: int | None
    top_p: float | None
    generator: torch.Generator | None
    eos_id: int | None

    def dist(self, logits: torch.Tensor) -> torch.Tensor:
        """(T, vocab) -> (T, vocab): the sampling distribution (greedy: the model's own, at temperature 1)."""
        return sampling_probs(logits, self.temperature, self.top_k, self.top_p)

    def pick(self, logits: torch.Tensor) -> int:
        """(1, vocab) -> one token, as ``generate`` would choose it."""
        return int(choose(logits, self.temperature, self.top_k, self.top_p, self.generator)[0])


def propose(s: _Pair, seq: torch.Tensor, k: int, where: str) -> tuple[list, list]:
    """1. The draft proposes up to k tokens, one pass each (fed first: whatever of ``seq`` it has not seen).
    -> (x1..xk, q1..qk: the draft's distribution (vocab,) each x was drawn from). Stops after an <eos>.
    A ``PromptLookup`` draft copies them from the text instead, each with q = 1 on it and no pass at all."""
    if isinstance(s.draft, PromptLookup):
        proposed = s.draft.propose(seq[0].tolist(), k)
        if s.eos_id in proposed:
            proposed = proposed[:proposed.index(s.eos_id) + 1]
        vocab = s.target.config.vocab_size
        return proposed, [torch.nn.functional.one_hot(torch.tensor(x), vocab).float().to(seq.device) for x in proposed]
    proposed, q_rows = [], []
    fed = seq[:, s.d_cache.seq_len:]  # (1, pending)
    for _ in range(k):
        logits = s.draft(fed, cache=s.d_cache, last_only=True)[0, -1].float()  # (vocab,)
        checks.finite_logits(logits, s.draft, f"{where}, the draft's pass")
        q_rows.append(s.dist(logits[None])[0])
        proposed.append(s.pick(logits[None]))
        if proposed[-1] == s.eos_id:
            break  # nothing after <eos> is worth proposing
        fed = torch.tensor([[proposed[-1]]], device=seq.device)
    return proposed, q_rows


def verify(s: _Pair, seq: torch.Tensor, proposed: list, where: str) -> tuple:
    """2. The target checks every proposal in ONE pass over [pending tokens, x1..xk]. -> (its logits after the
    text and after each x_i (k + 1, vocab), their distributions p (k + 1, vocab), the tokens it was fed)."""
    x = torch.tensor([proposed], dtype=seq.dtype, device=seq.device)  # (1, k)
    fed = torch.cat([seq[:, s.t_cache.seq_len:], x], dim=1)  # (1, pending + k)
    logits = s.target(fed, cache=s.t_cache)[0, -(len(proposed) + 1):].float()  # (k + 1, vocab)
    checks.finite_logits(logits, s.target, f"{where}, the target's verification pass")
    return logits, s.dist(logits), fed.shape[1]


def accept(s: _Pair, proposed: list, q_rows: list, logits: torch.Tensor, p_rows: torch.Tensor) -> tuple:
    """3. Keep a prefix of the proposals, then one token of the target's own: at the first rejection a
    correction, after all of them a bonus from its distribution past them. Greedy keeps x_i when it is the
    target's argmax; sampling keeps it by the rule, ``accept_or_resample``. -> (kept, token, kind)"""
    for i, x in enumerate(proposed):
        if s.temperature == 0:  # the target keeps x_i if it would have written x_i itself; else writes its own
            token = s.pick(logits[i:i + 1])
            kept = x == token
        else:  # kept with probability min(1, p(x)/q(x)); else the token comes from norm(max(0, p - q))
            kept, token = accept_or_resample(p_rows[i], q_rows[i], x, s.generator)
        if not kept:
            return i, token, "correction"
    return len(proposed), s.pick(logits[-1:]), "bonus" if proposed else "target"


def roll_back(s: _Pair, n_tokens: int):
    """4. Both caches forget what is not in the text of ``n_tokens`` tokens (the rejected tail); the last
    token stays pending: the next round feeds it."""
    for cache in (s.t_cache, s.d_cache):
        if cache is not None:
            cache.crop(min(cache.seq_len, n_tokens - 1))


def _chances(greedy: bool, kept: bool, p: torch.Tensor, q: torch.Tensor, x: int) -> tuple[float, float]:
    """A decided proposal's record: its chance to be kept, min(1, p(x)/q(x)), and α at its position,
    sum_x min(p(x), q(x)) (greedy: both 1.0 or 0.0, whether the two argmaxes agree)."""
    if greedy:
        return float(kept), float(kept)
    return acceptance_probability(p, q, x), min(1.0, expected_acceptance(p, q))


def one_round(s: _Pair, res: SpeculativeResult, k: int):
    """Propose, verify, accept, roll back; the text (``res.sequences``) grows by 1 .. k + 1 tokens (cut after an
    <eos>) and the round joins ``res.rounds``."""
    seq, where = res.sequences, f"round {len(res.rounds)}"
    proposed, q_rows = propose(s, seq, k, where)
    logits, p_rows, n_fed = verify(s, seq, proposed, where)
    accepted, token, kind = accept(s, proposed, q_rows, logits, p_rows)
    emitted = proposed[:accepted] + [token]
    if s.eos_id is not None and s.eos_id in emitted:
        emitted = emitted[:emitted.index(s.eos_id) + 1]
    res.sequences = torch.cat([seq, torch.tensor([emitted], dtype=seq.dtype, device=seq.device)], dim=1)
    roll_back(s, res.sequences.shape[1])
    passes = 0 if isinstance(s.draft, PromptLookup) else len(proposed)
    res.draft_forwards, res.target_forwards = res.draft_forwards + passes, res.target_forwards + 1
    chances = [_chances(s.temperature == 0, i < accepted, p_rows[i], q_rows[i], x)
               for i, x in enumerate(proposed[:accepted + 1])]  # the kept ones and the first rejected one
    res.rounds.append(SpeculativeRound(
        index=len(res.rounds), start=seq.shape[1], target_fed=n_fed, proposed=proposed,
        q=[round(float(q[x]), 6) for q, x in zip(q_rows, proposed)],
        p=[round(float(p_rows[i, x]), 6) for i, x in enumerate(proposed)],
        accept_prob=[round(a, 6) for a, _ in chances], accepted=accepted, target_token=token, kind=kind,
        emitted=emitted, draft_passes=passes, alpha=[alpha for _, alpha in chances]))


@torch.no_grad()
def speculative_generate(target, draft, input_ids, max_new_tokens: int, k: int = 4, temperature: float = 0.0,
                         top_k: int | None = None, top_p: float | None = None, eos_id: int | None = None,
                         seed: int | None = None) -> SpeculativeResult:
    """Generate up to ``max_new_tokens`` tokens after ``input_ids`` (one sequence) with draft + target.

    Same arguments as ``lib.generate`` (temperature 0 is greedy; top_k / top_p shape both p and q the same
    way), plus ``draft`` (a model on the same vocabulary, or a ``PromptLookup``) and ``k`` (tokens it proposes
    per round). Greedy output is identical to ``generate(target, ...)``; sampled output has the same distribution.
    """
    input_ids, k = _check_run(target, draft, input_ids, max_new_tokens, k, temperature, top_k, top_p, eos_id)
    need = input_ids.shape[1] + max_new_tokens - 1  # longest sequence either model is ever fed
    lookup = isinstance(draft, PromptLookup)
    s = _Pair(target, draft, KVCache(target.config, 1, need, device=target.device, dtype=target.dtype),
              None if lookup else KVCache(draft.config, 1, need, device=target.device, dtype=draft.dtype),
              temperature, top_k, top_p, make_generator(seed, target.device), eos_id)
    res = SpeculativeResult(sequences=input_ids, prompt_len=input_ids.shape[1], k=k,
                            sampling=dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed),
                            target_cache=s.t_cache, draft_cache=s.d_cache)
    with eval_mode(target), (nullcontext() if lookup else eval_mode(draft)):  # eval mode for the run, then back
        while res.n_new < max_new_tokens:
            one_round(s, res, min(k, max_new_tokens - res.n_new - 1))  # a round emits at most k + 1 tokens
            if eos_id is not None and res.rounds[-1].emitted[-1] == eos_id:
                break
    return res


@memoised
def measure_acceptance(target, draft, prompts, ks=(2, 4, 6), max_new_tokens: int = 40, temperature: float = 0.0,
                       top_k=None, top_p=None, eos_id=None, seeds=(0,)) -> list[dict]:
    """Run every prompt (list of token-id lists) for every seed with each k; one row of totals per k:
    new tokens, target passes (vs one per token for ``generate``), draft passes, proposals kept ("drafts kept":
    kept / proposed), the measured per-token acceptance rate α (``SpeculativeResult.alpha`` over all runs), the
    measured tokens per target pass (all passes, and over the ``full_rounds`` alone: rounds not cut short by the
    end of the text) and the tokens per pass ``expected_tokens_per_pass`` predicts from that α."""
    if not prompts:
        raise ValueError("prompts is empty: give at least one prompt (a list of token ids)")
    rows = []
    for k in progress.bar(ks, desc="speculative runs, per k", unit="k"):  # a bar where it is long
        runs = [speculative_generate(target, draft, p, max_new_tokens, k=k, temperature=temperature, top_k=top_k,
                                     top_p=top_p, eos_id=eos_id, seed=seed) for p in prompts for seed in seeds]
        new = sum(r.n_new for r in runs)
        passes = sum(r.target_forwards for r in runs)
        proposed, kept = sum(r.n_proposed for r in runs), sum(r.n_accepted for r in runs)
        decided = sum(r.n_decided for r in runs)
        alpha = sum(a for r in runs for x in r.rounds for a in x.alpha) / decided if decided else None
        full = [x for r in runs for x in r.full_rounds]
        rows.append({"k": k, "runs": len(runs), "new tokens": new, "target passes": passes,
                     "saved": f"{1 - passes / new:.1%}",
                     "draft passes": sum(r.draft_forwards for r in runs), "kept": f"{kept}/{proposed}",
                     "drafts kept": f"{kept / proposed:.1%}" if proposed else "-",
                     "α": round(alpha, 4) if alpha is not None else "-",
                     "tokens/pass": round(new / passes, 2),
                     "full rounds": len(full),
                     "tokens/full round": round(sum(len(x.emitted) for x in full) / len(full), 2) if full else "-",
                     "predicted": round(expected_tokens_per_pass(alpha, k), 2) if alpha is not None else "-"})
    return rows


def compare_drafts(target, drafts: dict, texts: dict, k: int = 4, max_new_tokens: int = 32) -> list[dict]:
    """Greedy speculative runs of every prompt in ``texts`` (name -> list of token-id lists) with every draft in
    ``drafts`` (name -> a model or a ``PromptLookup``); one row of totals per (text, draft): target and draft
    passes, proposals kept, the rounds in which the draft proposed nothing although asked for tokens (a lookup
    that found no match: the round is a plain decode step), the measured α and tokens per target pass."""
    rows = []
    pairs = [(text, prompts, name, draft) for text, prompts in texts.items() for name, draft in drafts.items()]
    for text, prompts, name, draft in progress.bar(pairs, desc="drafts x texts", unit="run"):
        runs = [speculative_generate(target, draft, p, max_new_tokens, k=k) for p in prompts]
        new, passes = sum(r.n_new for r in runs), sum(r.target_forwards for r in runs)
        decided = sum(r.n_decided for r in runs)
        alpha = sum(a for r in runs for x in r.rounds for a in x.alpha) / decided if decided else None
        asked = [(r, x) for r in runs for x in r.rounds  # rounds that asked for at least one token
                 if min(k, max_new_tokens - (x.start - r.prompt_len) - 1) > 0]
        rows.append({"text": text, "draft": name, "runs": len(runs), "new tokens": new,
                     "target passes": passes, "draft passes": sum(r.draft_forwards for r in runs),
                     "kept": f"{sum(r.n_accepted for r in runs)}/{sum(r.n_proposed for r in runs)}",
                     "no proposal": sum(not x.proposed for _, x in asked),
                     "α": round(alpha, 4) if alpha is not None else "-",
                     "tokens/pass": round(new / passes, 2)})
    return rows


# ----------------------------------------------------------------------------------------- instruments


@contextmanager
def count_forward_passes(**models):
    """Count every forward call of each named model: ``with count_forward_passes(target=m) as n: ...``;
    afterwards ``n["target"]`` is the number of passes (a forward hook counts them, not a formula)."""
    counts = {name: 0 for name in models}
    handles = []
    for name, m in models.items():
        if not isinstance(m, torch.nn.Module):
            raise TypeError(f"count_forward_passes({name}=...) needs a torch.nn.Module, got {type(m).__name__}")

        def hook(module, inputs, output, name=name):
            counts[name] += 1

        handles.append(m.register_forward_hook(hook))
    try:
        yield counts
    finally:
        for h in handles:
            h.remove()


# ------------------------------------------------------------------------------ statistics: is it still p?


@dataclass
class ChiSquare:
    statistic: float
    dof: int
    p_value: float
    n: int  # samples
    labels: list  # category per bin (the last may be "other": every category with a small expected count)
    observed: list
    expected: list

    def __str__(self):
        p = f"= {self.p_value:.3g}" if self.p_value > 0 else "< 1e-300"  # below float64's range it reads 0
        return say(f"chi-square = {self.statistic:.2f} with {self.dof} degrees of freedom over {self.n} samples, "
                   f"p-value {p}")


def chi_square_test(observed: dict, probs: dict, min_expected: float = 5.0) -> ChiSquare:
    """Pearson's goodness-of-fit test of counts ``observed`` (category -> count) against probabilities
    ``probs`` (category -> p). Categories expected fewer than ``min_expected`` times are pooled into one
    "other" bin. The p-value is the chi-square survival function, Q(dof/2, stat/2) (regularized upper
    incomplete gamma). A small p-value (say < 0.01) says the counts do not come from ``probs``."""
    n = sum(observed.values())
    if n <= 0:
        raise ValueError("chi_square_test needs at least one observation")
    total = sum(probs.values())
    if any(v < 0 for v in probs.values()) or abs(total - 1.0) > 1e-6:
        raise ValueError(f"probs must be non-negative and sum to 1, got sum {total:.8g}")
    unknown = [c for c, v in observed.items() if v > 0 and probs.get(c, 0.0) <= 0]
    if unknown:
        raise ValueError(f"observed categories with probability 0 under probs: {unknown[:5]} — the counts "
                         f"cannot come from this distribution")
    big = sorted((c for c, p in probs.items() if p * n >= min_expected), key=lambda c: -probs[c])
    labels = list(big)
    obs = [float(observed.get(c, 0)) for c in big]
    exp = [probs[c] * n for c in big]
    rest_p = 1.0 - sum(probs[c] for c in big)
    if rest_p * n > 1e-9:
        labels.append("other")
        obs.append(float(n - sum(obs)))
        exp.append(rest_p * n)
    dof = len(labels) - 1
    if dof < 1:
        raise ValueError(f"only one category has an expected count >= {min_expected}: collect more samples")
    stat = sum((o - e) ** 2 / e for o, e in zip(obs, exp))
    p_value = float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                            torch.tensor(stat / 2, dtype=torch.float64)))
    return ChiSquare(statistic=stat, dof=dof, p_value=p_value, n=n, labels=labels, observed=obs,
                     expected=[round(e, 4) for e in exp])


@torch.no_grad()
def next_token_probs(model, input_ids, n_tokens: int = 1, temperature: float = 1.0, top_k=None, top_p=None,
                     min_prob: float = 0.0) -> dict:
    """Exact probabilities of the model's next ``n_tokens`` (1 or 2) tokens after ``input_ids`` under the
    sampling transform: {(x1,): p} or {(x1, x2): p(x1) p(x2 | x1)}. Entries below ``min_prob`` are dropped
    (their mass is what ``chi_square_test`` pools as "other")."""
    n_tokens = checks.integer(n_tokens, "n_tokens", 1, 2, allowed="1 or 2")
    checks.number(temperature, "temperature", above=0, allowed="a sampling temperature > 0 (next_token_probs "
                                                             "gives the distribution tokens are drawn from)")
    min_prob = checks.number(min_prob, "min_prob", 0, 1)
    ids = checks.generate_args(model, input_ids, 1, temperature, top_k, top_p)
    if ids.shape[0] != 1:
        raise ValueError(f"next_token_probs takes one prompt, got a batch of {ids.shape[0]}")
    p1 = sampling_probs(model(ids)[0, -1:].float(), temperature, top_k, top_p)[0].double()  # (vocab,)
    p1 = p1 / p1.sum()  # exactly normalised in float64
    if n_tokens == 1:
        return {(x,): float(v) for x, v in enumerate(p1.tolist()) if v > min_prob}
    firsts = [x for x, v in enumerate(p1.tolist()) if v > 0]
    both = torch.cat([ids.expand(len(firsts), -1), torch.tensor(firsts, device=ids.device)[:, None]], dim=1)
    p2 = sampling_probs(model(both)[:, -1].float(), temperature, top_k, top_p).double()  # (n_first, vocab)
    p2 = p2 / p2.sum(-1, keepdim=True)
    joint = p1[firsts][:, None] * p2
    out = {}
    for i, x1 in enumerate(firsts):
        for x2, v in enumerate(joint[i].tolist()):
            if v > min_prob:
                out[(x1, x2)] = v
    return out


@dataclass
class DistributionCheck:
    """What ``distribution_check`` found: the test, the counts, and how the runs went."""

    chi: ChiSquare
    counts: dict  # tuple of the first n_tokens new tokens -> how many runs produced it
    runs: int
    n_proposed: int
    n_accepted: int
    target_forwards: int
    n_new: int

    @property
    def acceptance_rate(self) -> float:
        return self.n_accepted / self.n_proposed if self.n_proposed else 0.0

    def summary(self) -> str:
        return say(f"{self.runs} runs: {self.n_accepted}/{self.n_proposed} proposals kept "
                   f"({self.acceptance_rate:.1%}), {self.n_new} tokens in {self.target_forwards} target passes; "
                   f"{self.chi}")


@memoised
def distribution_check(target, draft, input_ids, runs: int = 1000, n_tokens: int = 2, k: int = 1,
                       max_new_tokens: int | None = None, temperature: float = 1.0, top_k=None, top_p=None,
                       seed: int = 0) -> DistributionCheck:
    """Sample ``runs`` speculative continuations (seeds seed, seed+1, ...), count their first ``n_tokens``
    tokens and test the counts against the target's exact probabilities (``next_token_probs``).
    ``max_new_tokens`` defaults to k + 1: one full round, so its accept / resample / bonus paths all occur."""
    runs = checks.integer(runs, "runs", 1)
    max_new = k + 1 if max_new_tokens is None else max_new_tokens
    if max_new < n_tokens:
        raise ValueError(f"max_new_tokens={max_new} is shorter than the n_tokens={n_tokens} being counted")
    counts: dict = {}
    proposed = accepted = passes = new = 0
    for i in range(runs):
        r = speculative_generate(target, draft, input_ids, max_new, k=k, temperature=temperature, top_k=top_k,
                                 top_p=top_p, seed=seed + i)
        key = tuple(r.new_tokens[0, :n_tokens].tolist())
        counts[key] = counts.get(key, 0) + 1
        proposed, accepted = proposed + r.n_proposed, accepted + r.n_accepted
        passes, new = passes + r.target_forwards, new + r.n_new
    probs = next_token_probs(target, input_ids, n_tokens, temperature, top_k, top_p)
    return DistributionCheck(chi=chi_square_test(counts, probs), counts=counts, runs=runs, n_proposed=proposed,
                             n_accepted=accepted, target_forwards=passes, n_new=new)
