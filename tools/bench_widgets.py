"""How fast every live widget answers its controls, in the kernel: ``make bench-widgets``.

Each live widget of the course is built as its notebook builds it (on ``lm`` where the notebook uses it, on the
toys elsewhere). Every control inside it (sliders, dropdowns, toggles, text boxes, buttons; not the Play widget,
which the browser animates by stepping the slider, and not a disabled control) is changed ``--repeat`` times the way
the browser changes it: its ``value`` is set (a button is clicked), which runs the widget's observers and redraw
synchronously, and every comm message the kernel would send to the page is serialised as the kernel serialises it
(JSON, with the binary buffers). Printed per control: p50 and p95 of that time in ms, and the bytes sent to the page
per change (what the browser then has to parse and draw: for a plotly figure in an ``Output``, the whole figure).

This is the kernel's share only. The page's share (parsing the message, re-creating a plotly figure, layout) comes
on top and is usually the larger one; the browser test records a few controls end to end (issue 36).

    python -m tools.bench_widgets                    # every widget, 20 changes per control
    python -m tools.bench_widgets --only ring --repeat 5
    python -m tools.bench_widgets --json out.json    # the rows, for comparing runs

Not a test: times depend on the machine and what else runs on it. Compare runs made side by side.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch

# ------------------------------------------------------------------ what the kernel sends to the page, measured


class _Sent:
    """Bytes the measuring comms have serialised since the last ``take()``."""

    total = 0

    @classmethod
    def take(cls) -> int:
        n, cls.total = cls.total, 0
        return n


@contextmanager
def measuring_comms():
    """Inside the block, every new widget's comm serialises its messages as a kernel's comm does (JSON + buffers)
    and counts the bytes (``_Sent``), instead of dropping them (outside a kernel, ipywidgets gives each widget a
    comm that sends nothing); afterwards, comms are made as before."""
    import comm as comm_pkg
    import ipywidgets.comm as ipyw_comm
    from comm.base_comm import BaseComm

    class MeasuringComm(BaseComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            _Sent.total += len(json.dumps(data or {}, default=str)) + sum(len(memoryview(b)) for b in buffers or ())

    def create_comm(*args, **kwargs):
        return MeasuringComm(*args, **kwargs)

    before = ipyw_comm.create_comm, comm_pkg.create_comm
    ipyw_comm.create_comm = comm_pkg.create_comm = create_comm
    try:
        yield
    finally:
        ipyw_comm.create_comm, comm_pkg.create_comm = before


# ------------------------------------------------------------------ the widgets, as their notebooks build them


def cases() -> dict:
    """{name: factory} of every live widget of the course, each as its notebook builds it."""
    import lib
    from lib.widgets import (attention, blocks, capacity, cost_curves, dashboard, memory, player, ring, roofline,
                             sampling, speculative, tiles, worked)

    def lm():
        return lib.load_demo("lm")

    def held_out(n: int) -> torch.Tensor:
        model, tok = lm()
        return torch.tensor([tok.bos_id] + lib.corpus.encode_text(tok, lib.corpus.heldout_text("en")[:n - 1]))

    def spec():
        model, tok = lib.load_demo("chat")
        return speculative.SpeculativeExplorer(model, lib.load_demo("draft")[0], tok, prompt="<s>the kv", k=4)

    return {
        "sampling (01, lm)": lambda: sampling.SamplingExplorer(*lm(), prompt="<s>人工智能", temperature=1.0),
        "player (02, lm)": lambda: player.GenerationPlayer(*lm(), prompt=lib.lm.PLAYER_PROMPTS["en"],
                                                           max_new_tokens=16),
        "attention (03, lm)": lambda: attention.AttentionExplorer(*lm(), lib.lm.PLAYER_PROMPTS["en"],
                                                                  max_new_tokens=16),
        "induction (03, lm)": lambda: attention.induction_explorer(*lm(), "en", n=40),
        "cost curves (03)": lambda: cost_curves.CostCurvesExplorer("lm", n=512),
        "worked (04, tiny)": lambda: worked.WorkedExplorer(*lib.load_demo("tiny"), prompt="<s>"),
        "memory (05)": lambda: memory.MemoryExplorer("llama-2-7b", "fp16", context=4096, batch=8),
        "roofline (06)": lambda: roofline.RooflineExplorer(model="llama-3-8b", dtype="bf16", batch=1, context=2048),
        "speculative (08, chat)": spec,
        "block pool (09, chat)": lambda: blocks.BlockPoolWidget(*lib.load_demo("chat")),
        "dashboard (10, lm)": lambda: dashboard.ServingDashboard(*lm()),
        "tiles (11, lm)": lambda: tiles.TileStepper(lm()[0], held_out(64)[None], block_size=16, row=40),
        "ring (12, lm)": lambda: ring.RingStepper(*lm(), held_out(48), window=16, sinks=4),
        "capacity (13)": lambda: capacity.CapacityExplorer("llama-3-8b", "H100 SXM", activation_gib=2),
    }


# ------------------------------------------------------------------ the controls and the values a learner gives them


def controls(root) -> list:
    """Every enabled control under the ipywidgets ``root``, top to bottom (Play widgets left out)."""
    import ipywidgets as W

    found, todo = [], [root]
    while todo:
        w = todo.pop(0)
        if isinstance(w, W.Box):
            todo[:0] = list(w.children)
        elif isinstance(w, W.Play) or getattr(w, "disabled", False):
            continue
        elif isinstance(w, (W.Button, W.ValueWidget)) and not isinstance(w, (W.Output, W.HTML, W.Label,
                                                                                W.HTMLMath, W.Image)):
            found.append(w)
    return found


def label(w) -> str:
    name = getattr(w, "description", "") or getattr(w, "tooltip", "") or ""
    return f"{type(w).__name__} {name!r}".strip()


def changes(w, n: int) -> list:
    """``n`` values for the control ``w``, each different from the one before (what a learner's clicks give);
    ``None`` for a button (it is clicked)."""
    import ipywidgets as W

    if isinstance(w, W.Button):
        return [None] * n
    if isinstance(w, (W.Checkbox, W.ToggleButton)):
        return [not w.value if i % 2 == 0 else w.value for i in range(n)]
    if hasattr(w, "options") and not isinstance(w, W.SelectionRangeSlider):
        values = [v[1] if isinstance(v, tuple) else v for v in w.options]  # (label, value) pairs or labels
        start = values.index(w.value) if w.value in values else 0
        return [values[(start + 1 + i) % len(values)] for i in range(n)] if len(values) > 1 else []
    if isinstance(w, (W.IntSlider, W.BoundedIntText, W.IntText)) and hasattr(w, "max"):
        lo, hi = int(w.min), int(w.max)
        if hi <= lo:
            return []
        out, v = [], int(w.value)
        for i in range(n):  # one notch, then a jump, as a learner drags and clicks
            v = v + 1 if (i % 2 == 0 and v < hi) else lo + (v * 7 + 3) % (hi - lo + 1)
            out.append(v if not out or v != out[-1] else (v + 1 if v < hi else lo))
        return out
    if isinstance(w, W.FloatSlider):
        lo, hi = float(w.min), float(w.max)
        return [lo + (hi - lo) * ((i * 0.37 + 0.1) % 1.0) for i in range(n)] if hi > lo else []
    if isinstance(w, (W.Text, W.Textarea)):
        base = w.value
        return [base + "e" if i % 2 == 0 else base for i in range(n)]  # the text edited at its end, and back
    return []


@dataclass
class Row:
    widget: str
    control: str
    changes: int
    p50_ms: float
    p95_ms: float
    kib_per_change: float


def measure(name: str, live, repeat: int) -> list[Row]:
    rows = []
    for w in controls(live.widget):
        values = changes(w, repeat)
        if not values:
            continue
        original = None if values[0] is None else w.value
        times, sent = [], []
        _Sent.take()
        for v in values:
            t0 = time.perf_counter()
            if v is None:
                w.click()
            else:
                w.value = v
            times.append((time.perf_counter() - t0) * 1e3)
            sent.append(_Sent.take())
        if original is not None:
            w.value = original
            _Sent.take()
        times.sort()
        rows.append(Row(name, label(w), len(times), round(statistics.median(times), 1),
                        round(times[min(len(times) - 1, int(0.95 * len(times)))], 1),
                        round(statistics.mean(sent) / 1024, 1)))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20, help="changes per control (default 20)")
    parser.add_argument("--only", default="", help="only the widgets whose name contains this")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (the notebooks use 1)")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    chosen = {k: f for k, f in cases().items() if args.only in k}
    if not chosen:
        parser.error(f"--only {args.only!r} matches no widget; the widgets: {', '.join(cases())}")
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    rows = []
    print(f"{'widget':24s} {'control':42s} {'p50 ms':>8s} {'p95 ms':>8s} {'KiB/change':>11s}")
    try:
        with measuring_comms():
            for name, build in chosen.items():
                t0 = time.perf_counter()
                live = build()
                print(f"{name:24s} {'(built)':42s} {(time.perf_counter() - t0) * 1e3:8.0f}", flush=True)
                for row in measure(name, live, args.repeat):
                    rows.append(row)
                    print(f"{'':24s} {row.control[:42]:42s} {row.p50_ms:8.1f} {row.p95_ms:8.1f} "
                          f"{row.kib_per_change:11.1f}", flush=True)
    finally:
        torch.set_num_threads(threads)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([asdict(r) for r in rows], f, indent=1, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
