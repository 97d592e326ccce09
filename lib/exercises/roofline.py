"""Build-it exercise of notebook 06 (the roofline): the arithmetic intensity of a weight product at batch B and
whether a machine runs it compute-bound. The hidden cases come from ``lib.costs.step_cost`` (its FFN operator,
a pair of weight products) and ``lib.roofline.Machine``."""
from __future__ import annotations

from . import Case, exercise
from .. import costs
from ..i18n import t
from ..config import ModelConfig
from ..roofline import DEFAULT_GPU, REFERENCE_MACHINES, Machine


def weight_product_solution(batch: int, d_in: int, d_out: int, bytes_per_value: int, peak_gflops: float,
                            bandwidth_gbs: float):
    """(intensity, bound) of Y = X·W with X (batch, d_in), W (d_in, d_out), the weights read once."""
    flops = 2 * batch * d_in * d_out  # one multiply-add per weight per row of X
    moved = d_in * d_out * bytes_per_value  # the weights, read once for the whole batch
    intensity = flops / moved
    bound = "memory-bound" if intensity * bandwidth_gbs < peak_gflops else "compute-bound"
    return intensity, bound


_BYTES = {2: "bf16", 4: "fp32", 1: "int8"}


def _expected(batch, d_in, d_out, bytes_per_value, machine: Machine):
    # an FFN without biases whose up and down projections are the d_in x d_out product and its transpose
    cfg = ModelConfig(vocab_size=8, n_layers=1, d_model=d_in, n_heads=1, d_ff=d_out, bias=False, max_seq_len=8)
    op = costs.step_cost(cfg, 2, 1, batch, _BYTES[bytes_per_value]).by_operator["ffn"]
    intensity = op.flops / op.bytes
    return intensity, machine.bound(intensity)


@exercise("weight_product_intensity", title="Arithmetic intensity of a weight product",
          hints=("For a batch of B sequences, what grows with B: the FLOPs, the bytes of weights read, or both?",
                 "Every weight does one multiply-add (2 FLOPs) per sequence, but it is read from memory once for "
                 "the whole batch; intensity = FLOPs / bytes, compared with peak / bandwidth.",
                 "FLOPs: 2 per multiply-add, one multiply-add per weight per sequence in the batch; bytes: the "
                 "weights, read once for the whole batch (activations are left out, as in lib.costs). "
                 "Compute-bound when intensity × bandwidth reaches the peak."),
          solution=weight_product_solution)
def weight_product_cases():
    cpu = Machine("a laptop CPU", 100.0, 40.0, "fp32")
    h100, h200 = DEFAULT_GPU, REFERENCE_MACHINES["H200 SXM"]
    for batch, d_in, d_out, bpv, m, what in ((1, 4096, 11008, 2, h100, "one sequence decoding in bf16 on an H100"),
                                             (512, 4096, 14336, 2, h100, "a batch of 512 in bf16 on an H100"),
                                             (256, 4096, 4096, 2, h200, "a batch of 256 in bf16 on an H200"),
                                             (8, 64, 256, 4, cpu, "a batch of 8 in fp32 on a small CPU"),
                                             (1, 4096, 4096, 1, h100, "one sequence with int8 weights")):
        yield Case(t("{what}: W is {d_in} x {d_out}", what=t(what), d_in=d_in, d_out=d_out), (batch, d_in, d_out, bpv, m.peak_gflops, m.bandwidth_gbs),
                   expected=_expected(batch, d_in, d_out, bpv, m))
