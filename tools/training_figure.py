"""The real model's training curves, from its own training record: ``python -m tools.training_figure [NAME ...]``.

Reads ``lib.demo.demo_info(name)`` (the loss every 25 steps and the validation bits per character per language
every 250, written into the weights file by ``python -m lib.train_lm``) and draws ``assets/NAME-training.png``:
the training loss in bits per character, and the held-out bits per character of each language beside each
language's unigram entropy (what a model that ignores context scores) and the uniform guess.
"""
from __future__ import annotations

import math
import sys

from lib.corpus import LANGUAGES, heldout_text
from lib.demo import ASSETS, demo_info
from lib.lm import unigram_entropy
from lib.widgets import style


def draw(name: str = "lm"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lib.widgets.fonts import use_cjk_font

    style.apply()
    use_cjk_font()
    info = demo_info(name)
    steps, loss = zip(*info["losses"])
    fig, ax = plt.subplots(figsize=(style.FIGURE_WIDTH, 4.0), layout="constrained")
    ax.plot(steps, [x / math.log(2) for x in loss], color=style.MUTED, lw=0.8, label="training loss (both languages)")
    # languages are not concepts of the course: both in ink, told apart by line style, marker and label
    looks = {"en": dict(color=style.INK, ls="-", marker="o"), "zh": dict(color=style.INK, ls="--", marker="s")}
    for lang in LANGUAGES:
        xs = [s for s, _ in info["val_bits_per_char"]]
        ys = [v[lang] for _, v in info["val_bits_per_char"]]
        ax.plot(xs, ys, ms=3, label=f"held-out {lang}", **looks[lang])
        ax.axhline(unigram_entropy(heldout_text(lang)), color=looks[lang]["color"], ls=":", lw=1)
        ax.annotate(f"unigram entropy ({lang})", (steps[-1], unigram_entropy(heldout_text(lang))),
                    textcoords="offset points", xytext=(-4, 3), ha="right", fontsize="small")
    ax.set_xlabel("training step (8 windows of 512 characters each)")
    ax.set_ylabel("bits per character")
    minutes = info["seconds"] / 60
    ax.set_title(f"{name}: {info['parameters']:,} parameters, {info['spec']['steps']:,} steps, {minutes:.0f} min "
                 f"on {info['threads']} thread(s)", loc="left")
    ax.set_ylim(0, None)
    fig.legend(loc="outside lower center", ncols=3, frameon=False)  # below the axes: clear of every curve and label
    path = ASSETS / f"{name}-training.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    for n in sys.argv[1:] or ["lm", "lm-draft"]:
        print(f"wrote {draw(n)}")
