"""Does a model read its context? Every figure of the real model's copying, heads, window and sink, for one
checkpoint: ``python -m tools.context_report [PATH ...]`` (default: the shipped ``assets/lm.safetensors`` and
the model it replaced, ``assets/training/lm-base.safetensors``).

Not a test: ``tests/test_lm_reads.py`` asserts the thresholds on the shipped weights; this prints the numbers (for a
training run's checkpoints under ``.cache/train/`` too, so a run can be compared with the model it replaces).

- copying: a random string written twice (whole vocabulary; lower-case letters), second-copy loss / first;
  a held-out passage of 120 characters written twice, bits/char of each copy (English, Chinese)
- heads: the strongest previous-token head (held-out text) and induction head (a random string written twice)
- held-out bits/char over the whole split at the full context (``lib.lm.bits_per_char``)
- the cache's worth: held-out windows of 512 whose first 128 characters come again at the end, bits/char with
  every key, with a 64-position window, and with the window plus 4 sinks
- the first position: the largest share of attention a head in layer >= 1 gives to position 0 (Gu et al.'s
  metric: queries at positions >= 64)
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

from lib import heads
from lib.corpus import LANGUAGES, heldout_text
from lib.demo import ASSETS, load_checkpoint
from lib.lm import bits_per_char, windows
from lib.sinks import drift_sweep, sink_share


def report(path: Path) -> dict:
    model, tok, _ = load_checkpoint(path)
    out = {"model": str(path)}
    out["copy_random"] = heads.copying(model, tok, n=100)["ratio"]
    out["copy_letters"] = heads.copying(model, tok, n=100, alphabet=heads.LETTERS)["ratio"]
    prev = torch.stack([heads.previous_token_share(model, w) for w in windows(tok, heldout_text("en"), 256, 2)])
    out["previous_token_head"] = heads.strongest(prev.mean(0))
    ind = torch.stack([heads.induction_share(model, heads.repeated_random(tok, 100, s), 100) for s in range(4)])
    out["induction_head"] = heads.strongest(ind.mean(0))
    for lang in LANGUAGES:
        c = heads.passage_copying(model, tok, lang)
        out[f"passage_{lang}"] = (c["first"], c["second"], c["ratio"])
        out[f"heldout_{lang}"] = bits_per_char(model, tok, heldout_text(lang))
        far = heads.repeated_far(tok, lang)
        full, window, sinks = drift_sweep(model, far, [(None, 0), (64, 0), (64, 4)])
        out[f"far_{lang}"] = tuple(r["nll"] / math.log(2) for r in (full, window, sinks))
        sink = torch.stack([sink_share(model, w, 1, 64) for w in windows(tok, heldout_text(lang), 512, 2)]).mean(0)
        layer, head, share = heads.strongest(sink[1:])  # layers >= 1 only: layer 0 cannot yet know where it is
        out[f"sink_{lang}"] = (layer + 1, head, share)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.context_report", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[ASSETS / "lm.safetensors", ASSETS / "training" / "lm-base.safetensors"])
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    for path in args.paths:
        print(json.dumps(report(path)), flush=True)


if __name__ == "__main__":
    main()
