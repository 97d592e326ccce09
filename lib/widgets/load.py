"""Throughput against latency as the arrival rate grows (notebook 10): ``lib.serving.rate_sweep``'s points drawn as
two panels, tokens per second and time to first token (mean and 90th percentile), one line per batching policy.
The knee is where the queue starts to grow: throughput stops following the rate and the first token waits longer.

* ``load_table`` (text) and ``plot_load`` (matplotlib) are the static tier; the points are the figure's data, the
  same on every run on the "predicted" clock (``lib.serving.arrivals``).
"""
from __future__ import annotations

import statistics

from ..i18n import t
from ..serving.arrivals import p90
from ..text import text_table
from . import style


def load_table(points) -> str:
    """One row per point: policy, rate, tokens/s, TTFT mean / p90, TPOT mean, mean and largest queue."""
    rows = [{k: v for k, v in p.row().items() if k in ("policy", "rate (req/s)", "tokens/s", "TTFT mean (ms)",
                                                        "TTFT p90 (ms)", "TPOT mean (ms)", "mean queue", "max queue")}
            for p in points]
    return text_table(rows, translate=True)


def plot_load(points, title: str = ""):
    """Tokens per second (left) and time to first token (right: mean solid, p90 dashed, log scale) against the
    arrival rate, one look per policy (``style.categories``: neutral greys told apart by marker and line)."""
    import matplotlib.pyplot as plt

    policies = list(dict.fromkeys(p.policy for p in points))
    looks = style.categories(policies)
    fig, (tput, ttft) = plt.subplots(1, 2, figsize=(style.FIGURE_WIDTH, 3.6), layout="constrained")
    for policy in policies:
        pts = sorted((p for p in points if p.policy == policy), key=lambda p: p.rate)
        rates, look = [p.rate for p in pts], looks[policy]
        tput.plot(rates, [p.tokens_per_second for p in pts], color=look.colour, marker=look.marker,
                  linestyle=look.linestyle, label=t(policy))
        mean, p90s = [1e3 * statistics.mean(p.ttft) for p in pts], [1e3 * p90(p.ttft) for p in pts]
        ttft.plot(rates, mean, color=look.colour, marker=look.marker, linestyle="-", label=t("{p}, mean", p=t(policy)))
        ttft.plot(rates, p90s, color=look.colour, marker=look.marker, linestyle="--", fillstyle="none",
                  label=t("{p}, p90", p=t(policy)))
    tput.set_xlabel(t("arrival rate (requests/s)"))
    tput.set_ylabel(t("tokens/s"))
    tput.set_ylim(bottom=0)
    ttft.set_xlabel(t("arrival rate (requests/s)"))
    ttft.set_ylabel(t("time to first token (ms)"))
    ttft.set_yscale("log")
    style.no_minor_log_labels(ttft)
    ttft.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    if title:
        fig.suptitle(title, x=0.01, ha="left")
    style.place_legend(tput, loc="upper left", frameon=False)  # last, on the final layout: clear of the curves
    return fig
