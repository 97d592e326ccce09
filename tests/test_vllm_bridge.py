"""lib.vllm_bridge: kv_capacity against hand-computed cases and lib.costs, the map's entries, the source check."""
import importlib
import math
from collections import defaultdict

import pytest
from hypothesis import given, settings, strategies as st

import lib
from lib import costs
from lib.roofline import REFERENCE_MACHINES, Machine
from lib.text import text_table
from lib import vllm_bridge as vb

GiB = 2 ** 30


# ------------------------------------------------------------------------------------------- kv_capacity

def test_llama_3_8b_on_an_h100_by_hand():
    # Llama-3-8B has 8,030,261,248 parameters (its model card); bf16: 2 bytes each.
    weights = 2 * 8_030_261_248
    total = int(79.22 * GiB)  # what CUDA reports on an H100 80GB (vLLM logs total_gpu_memory 79.22GiB), not 80 GiB
    requested = math.ceil(total * 0.92)
    block = 2 * 32 * 8 * 128 * 16 * 2  # K and V × 32 layers × 8 KV heads × head_dim 128 × 16 tokens × 2 bytes
    cap = vb.kv_capacity("llama-3-8b", "H100 SXM")
    assert (cap.total_memory, cap.weights, cap.requested, cap.block_bytes) == (total, weights, requested, block)
    assert cap.available == requested - weights
    assert cap.num_blocks == (requested - weights) // block == 29657
    assert cap.tokens == 29657 * 16 == cap.reported_tokens  # 8192 is a whole number of blocks
    assert cap.usable_blocks == 29656  # block 0 is vLLM's null block
    assert cap.max_concurrency == pytest.approx(29657 / 512)
    assert cap.blocks_per_request == 512 and cap.starts


def test_a_tiny_model_by_hand_with_every_deduction():
    c = lib.ModelConfig(vocab_size=100, n_layers=2, d_model=8, n_heads=2, n_kv_heads=1, max_seq_len=20)
    total, util = 1_000_003, 0.5
    cap = vb.kv_capacity(c, gpu=total, gpu_memory_utilization=util, block_size=4, kv_cache_dtype="fp8", dtype="fp32",
                         activation_peak=1000, non_torch=200, cudagraph=30, max_model_len=10)
    requested = 500_002  # ceil(500,001.5)
    weights = 4 * costs.param_count(c)
    block = 2 * 2 * 1 * 4 * 4 * 1  # K, V × 2 layers × 1 KV head × head_dim 4 × 4 tokens × 1 byte (fp8)
    assert (cap.requested, cap.weights, cap.block_bytes, cap.kv_dtype) == (requested, weights, block, "fp8")
    assert cap.available == requested - weights - 1230
    assert cap.num_blocks == cap.available // block
    # vLLM's logged size: num_blocks / ceil(10 / 4) requests of 10 tokens
    assert cap.reported_tokens == int(cap.num_blocks / 3 * 10)
    assert cap.reported_tokens < cap.tokens


def test_kv_cache_dtype_auto_follows_the_weights_and_fp8_halves_a_block():
    auto = vb.kv_capacity("llama-2-7b", "H200 SXM", dtype="fp16")
    fp8 = vb.kv_capacity("llama-2-7b", "H200 SXM", dtype="fp16", kv_cache_dtype="fp8_e5m2")
    assert auto.kv_dtype == "fp16" and fp8.kv_dtype == "fp8"
    assert fp8.block_bytes * 2 == auto.block_bytes
    assert fp8.num_blocks in (2 * auto.num_blocks, 2 * auto.num_blocks + 1)


def test_vllm_refuses_to_start_when_one_full_length_request_does_not_fit():
    # Llama-2-70B in bf16 on one H200: 28 blocks of 16 tokens (~0.14 GiB) are left, a 4,096-token request needs 256
    cap = vb.kv_capacity("llama-2-70b", "H200 SXM")
    assert (cap.num_blocks, cap.blocks_per_request, cap.starts) == (28, 256, False)
    assert vb.kv_capacity("llama-2-70b", "H200 SXM", max_model_len=27 * 16).starts  # 27 usable blocks suffice
    assert not vb.kv_capacity("llama-2-70b", "H200 SXM", max_model_len=27 * 16 + 1).starts


def test_weights_larger_than_the_budget_give_no_blocks():
    cap = vb.kv_capacity("llama-2-70b", "H100 SXM")
    assert cap.available < 0 and cap.num_blocks == cap.usable_blocks == cap.tokens == cap.reported_tokens == 0


@settings(max_examples=60, deadline=None, derandomize=True)
@given(model=st.sampled_from(sorted(lib.PRESETS)), gpu=st.sampled_from(["H100 SXM", "H200 SXM"]),
       util=st.floats(0.05, 1.0), block_size=st.sampled_from([1, 8, 16, 32, 128]),
       kv=st.sampled_from(sorted(vb.KV_CACHE_DTYPES)), dtype=st.sampled_from(["bf16", "fp16", "fp32"]),
       activation=st.integers(0, 8 * GiB))
def test_capacity_agrees_with_lib_costs(model, gpu, util, block_size, kv, dtype, activation):
    cap = vb.kv_capacity(model, gpu, util, block_size, kv, dtype, activation_peak=activation)
    kv_dtype = vb.KV_CACHE_DTYPES[kv] or dtype
    assert cap.total_memory == int(REFERENCE_MACHINES[gpu].memory_gib * GiB)
    assert cap.weights == costs.weight_bytes(model, dtype)
    assert cap.block_bytes == costs.kv_cache_bytes(model, block_size, dtype=kv_dtype)
    assert cap.block_bytes == block_size * costs.kv_bytes_per_token(model, kv_dtype)
    if cap.num_blocks:
        assert cap.kv_bytes == costs.kv_cache_bytes(model, cap.tokens, dtype=kv_dtype)
        assert 0 <= cap.available - cap.kv_bytes < cap.block_bytes  # whole blocks, the rest left over
    else:
        assert cap.available < cap.block_bytes
    assert cap.reported_tokens <= cap.tokens


def test_capacity_errors_say_what_is_allowed():
    with pytest.raises(ValueError, match=r"gpu_memory_utilization must be a fraction above 0 and at most 1 .*got 1.5"):
        vb.kv_capacity("gpt2", gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match=r"gpu_memory_utilization must be .*got 0"):
        vb.kv_capacity("gpt2", gpu_memory_utilization=0)
    with pytest.raises(ValueError, match=r"kv_cache_dtype='int8' is not supported; allowed: auto, float16"):
        vb.kv_capacity("gpt2", kv_cache_dtype="int8")
    with pytest.raises(ValueError, match=r"gpu='A100' has no memory size; allowed: H100 SXM, H200 SXM, or the total"):
        vb.kv_capacity("gpt2", gpu="A100")
    with pytest.raises(ValueError, match=r"gpu must be a reference machine's name or its total memory in bytes"):
        vb.kv_capacity("gpt2", gpu=80.5)
    with pytest.raises(ValueError, match=r"dtype \(the weights'\) must be fp32, bf16 or fp16 here, got 'int8'"):
        vb.kv_capacity("gpt2", dtype="int8")
    with pytest.raises(ValueError, match=r"activation_peak must be a number of bytes >= 0, got -1"):
        vb.kv_capacity("gpt2", activation_peak=-1)
    with pytest.raises(ValueError, match=r"block_size must be an integer >= 1, got 0"):
        vb.kv_capacity("gpt2", block_size=0)
    with pytest.raises(ValueError, match=r"unknown model 'gpt5'"):
        vb.kv_capacity("gpt5")


def test_reference_machines_carry_their_memory():
    # what CUDA reports (and vLLM multiplies), a little less than the datasheets' 80 GB and 141 GB
    assert REFERENCE_MACHINES["H100 SXM"].memory_gib == 79.22 and REFERENCE_MACHINES["H200 SXM"].memory_gib == 139.8
    assert Machine("x", 1.0, 1.0).memory_gib is None
    with pytest.raises(ValueError, match="Machine.memory_gib must be a finite number > 0"):
        Machine("x", 1.0, 1.0, memory_gib=-1.0)


# ------------------------------------------------------------------------------------------------- the map

def resolve_lib_name(name: str):
    """The object a dotted lib name points to (``lib.paged.PagedKVPool.gather``), or an ImportError/AttributeError
    that names the missing part."""
    parts = name.split(".")
    if parts[0] != "lib":
        raise ValueError(f"lib names start with 'lib.', got {name!r}")
    obj, i = importlib.import_module("lib"), 1
    while i < len(parts):  # a submodule first, else an attribute
        try:
            obj = importlib.import_module(".".join(parts[: i + 1]))
        except ModuleNotFoundError:
            obj = getattr(obj, parts[i])
        i += 1
    return obj


def test_every_lib_name_of_the_map_imports():
    for m in vb.BRIDGE:
        assert m.lib_names, m.idea
        for name in m.lib_names:
            resolve_lib_name(name)  # raises if it does not import
    with pytest.raises(AttributeError):
        resolve_lib_name("lib.paged.NoSuchThing")
    with pytest.raises(ValueError, match="lib names start with 'lib.', got 'os.path'"):
        resolve_lib_name("os.path")


def test_map_entries_are_well_formed():
    ideas = [m.idea for m in vb.BRIDGE]
    assert len(ideas) == len(set(ideas))
    for m in vb.BRIDGE:
        assert m.vllm_path.startswith("vllm/") and m.vllm_path.endswith(".py"), m
        assert m.vllm_name and m.does and m.lib_differs, m
        assert (m.default_at is None) == (m.engine_arg is None), f"{m.idea}: a default needs an engine argument"
        if m.default_at is not None:
            assert m.default_at[0].startswith("vllm/") and "." in m.default_at[1]
    covered = {m.idea for m in vb.BRIDGE}
    for idea in ("block size", "GPU memory budget", "prefix caching", "KV cache manager", "block pool",
                 "preemption", "speculative decoding", "KV cache dtype", "sliding window",
                 "paged attention reads the blocks", "parallel sampling (n > 1)"):
        assert idea in covered
    defaults = {m.engine_arg: m.default for m in vb.BRIDGE if m.engine_arg}
    assert defaults["gpu_memory_utilization"] == 0.92 and defaults["block_size"] == 16
    assert defaults["enable_prefix_caching"] is True and defaults["watermark"] == 0.0
    assert defaults["kv_cache_dtype"] == "auto"
    table = text_table(vb.bridge_rows())
    assert len(table.splitlines()) == len(vb.BRIDGE) + 2 and "gpu_memory_utilization" in table


# ---------------------------------------------------------------------------------------- the source check

def _fake_tree(root, skip=()):
    """A source tree that holds exactly what the map says (names, EngineArgs fields, defaults, quoted lines)."""
    classes = defaultdict(lambda: defaultdict(dict))  # file -> class -> attr -> default
    functions, evidence = defaultdict(set), defaultdict(list)
    for m in vb.BRIDGE:
        head, _, attr = m.vllm_name.partition(".")
        if attr:
            classes[m.vllm_path][head].setdefault(attr, None)
        elif head[0].isupper():
            classes[m.vllm_path].setdefault(head, {})
        else:
            functions[m.vllm_path].add(head)
        evidence[m.vllm_path] += m.evidence
        if m.engine_arg and not m.engine_arg.startswith("SamplingParams."):
            classes["vllm/engine/arg_utils.py"]["EngineArgs"].setdefault(m.engine_arg, None)
        if m.default_at:
            cls, _, field = m.default_at[1].partition(".")
            classes[m.default_at[0]][cls][field] = m.default
    files = set(classes) | set(functions) | set(evidence) | {"vllm/__init__.py", "vllm/_version.py"}
    for rel in files:
        if rel in skip:
            continue
        lines = [f"# {e}" for e in evidence.get(rel, ())]
        lines += [f"def {f}():\n    pass" for f in sorted(functions.get(rel, ()))]
        for cls, attrs in classes.get(rel, {}).items():
            lines.append(f"class {cls}:\n    pass")
            lines += [f"    {a} = Field(default={d!r}, gt=0)" for a, d in attrs.items()]
        if rel == "vllm/_version.py":
            lines.append("__version__ = version = '9.9.9'")
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    return root


def test_the_source_check_passes_on_a_tree_that_holds_the_map(tmp_path):
    report = vb.check_against_source(_fake_tree(tmp_path))
    assert report.ok, str(report)
    assert report.version == "9.9.9" and report.checked > 3 * len(vb.BRIDGE)
    assert str(report).endswith("all hold.")
    assert vb.check_against_source(tmp_path / "vllm").ok  # the package directory itself


def test_the_source_check_names_what_changed(tmp_path):
    root = _fake_tree(tmp_path, skip=("vllm/v1/engine/parallel_sampling.py",))
    cache = root / "vllm/config/cache.py"
    cache.write_text(cache.read_text().replace("default=0.92", "default=0.9"))
    pool = root / "vllm/v1/core/block_pool.py"
    pool.write_text(pool.read_text().replace("self.null_block", "self.empty_block"))
    report = vb.check_against_source(root)
    assert not report.ok and len(report.problems) == 3
    text = str(report)
    assert "GPU memory budget: CacheConfig.gpu_memory_utilization defaults to 0.9 in vllm/config/cache.py, " \
           "the map says 0.92" in text
    assert "parallel sampling (n > 1): vllm/v1/engine/parallel_sampling.py is missing" in text
    assert "block pool: vllm/v1/core/block_pool.py no longer contains 'self.null_block = " in text


def test_the_source_check_refuses_what_is_not_a_source_tree(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a vLLM wheel .* nor a directory holding vllm/__init__.py"):
        vb.check_against_source(tmp_path)


def test_the_map_holds_in_the_real_vllm_source():
    where = vb.find_vllm_source()
    if where is None:
        pytest.skip("no vLLM source here: `pip download vllm --no-deps -d /tmp/vllm-wheel` (or unzip it to "
                    "/tmp/vllm-src) to check the map against it")
    report = vb.check_against_source(where)
    assert report.ok, str(report)
    if report.version == vb.VLLM_VERSION:
        assert vb.VLLM_CHECKED == vb.VLLM_VERSION


# ---------------------------------------------------------------------------------------- a live engine

def test_why_no_engine_says_why():
    reason = vb.why_no_engine()
    if reason is not None:
        assert "vllm is not installed" in reason or "no CUDA GPU" in reason
        with pytest.raises(RuntimeError, match="cannot start a vLLM engine here: "):
            vb.engine_capacity()


def test_compare_with_engine_on_numbers_an_engine_could_report():
    total, util = 80 * GiB, 0.3
    lib_cap = vb.kv_capacity("gpt2", gpu=total, gpu_memory_utilization=util)
    available = lib_cap.available - 3 * GiB  # vLLM measured 3 GiB of activations and other memory
    measured = {"total_memory": total, "gpu_memory_utilization": util, "requested": lib_cap.requested,
                "available": available, "weights": lib_cap.weights + 1000, "num_blocks": available // lib_cap.block_bytes,
                "block_size": 16}
    rows = {r["quantity"]: (r["vLLM"], r["lib"]) for r in vb.compare_with_engine(measured)}
    assert rows["requested memory (bytes)"][0] == rows["requested memory (bytes)"][1]
    assert rows["KV memory (bytes)"] == (available, available)
    assert rows["KV blocks"][0] == rows["KV blocks"][1]
    assert rows["weights (bytes)"] == (lib_cap.weights + 1000, lib_cap.weights)


def test_engine_capacity_reads_what_vllm_sets(monkeypatch):
    """The plumbing of engine_capacity against a stand-in for vllm with the attributes 0.33.0 has (vllm.LLM,
    llm_engine.vllm_config.cache_config, collective_rpc running a function on the GPU worker)."""
    import importlib.machinery
    import sys
    import types

    lib_cap = vb.kv_capacity("gpt2", gpu=80 * GiB, gpu_memory_utilization=0.3)
    available = lib_cap.available - GiB
    worker = types.SimpleNamespace(init_snapshot=types.SimpleNamespace(total_memory=80 * GiB),
                                   requested_memory=lib_cap.requested, available_kv_cache_memory_bytes=available,
                                   model_runner=types.SimpleNamespace(model_memory_usage=lib_cap.weights))
    seen = {}

    class LLM:
        def __init__(self, **kwargs):
            seen.update(kwargs)
            cache = types.SimpleNamespace(num_gpu_blocks=available // lib_cap.block_bytes, block_size=16)
            self.llm_engine = types.SimpleNamespace(vllm_config=types.SimpleNamespace(cache_config=cache))

        def collective_rpc(self, method):
            return [method(worker)]

    fake = types.ModuleType("vllm")
    fake.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    fake.LLM = LLM
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setattr(vb.torch.cuda, "is_available", lambda: True)
    assert vb.why_no_engine() is None
    measured = vb.engine_capacity(gpu_memory_utilization=0.3)
    assert seen["model"] == vb.ENGINE_MODEL and seen["gpu_memory_utilization"] == 0.3
    assert measured == {"total_memory": 80 * GiB, "gpu_memory_utilization": 0.3, "requested": lib_cap.requested,
                        "available": available, "weights": lib_cap.weights,
                        "num_blocks": available // lib_cap.block_bytes, "block_size": 16}
    for row in vb.compare_with_engine(measured):
        assert row["vLLM"] == row["lib"], row


def test_the_batch_that_fits_is_vllms_pool_over_the_blocks_of_one_sequence():
    """max_sequences: kv_capacity's usable blocks // blocks per sequence. Llama-2-7B on an H100 at 4,096 tokens
    holds 30 (13's "maximum concurrency" 30.16, its whole part): a batch of 32 there does not fit (issue 38's N1)."""
    from lib.vllm_bridge import kv_capacity, max_sequences

    cap = kv_capacity("llama-2-7b", "H100 SXM", max_model_len=4096)
    assert max_sequences("llama-2-7b", 4096) == cap.usable_blocks // 256 == 30 == int(cap.max_concurrency)
    assert max_sequences("llama-2-7b", 4097) == cap.usable_blocks // 257  # a token more: a block more each
    assert max_sequences("llama-3-8b", 4096) > 3 * max_sequences("llama-2-7b", 4096)  # GQA: a quarter of the bytes
    assert max_sequences("llama-2-7b", 512, 12 * 2 ** 30) == 0  # the weights alone fill a 12 GiB card
    with pytest.raises(ValueError, match="context must be a number of tokens >= 1, got 0"):
        max_sequences("llama-2-7b", 0)


def test_the_roofline_draws_open_the_batches_whose_cache_does_not_fit():
    import matplotlib
    matplotlib.use("Agg")
    from lib.widgets import roofline as wr

    h100, cpu = wr.REFERENCE_MACHINES["H100 SXM"], wr.Machine("this CPU", 100.0, 10.0, "fp32")
    pts = wr.roofline_points(("llama-2-7b", "llama-3-8b"), "bf16", batches=(1, 8, 32, 256), length=4096)
    open_ = wr.points_that_do_not_fit(pts, h100)
    assert sorted((p["model"], p["batch"], p["phase"]) for p in pts if id(p) in open_) == [
        ("llama-2-7b", 32, "decode"), ("llama-2-7b", 32, "prefill"), ("llama-2-7b", 256, "decode"),
        ("llama-2-7b", 256, "prefill"), ("llama-3-8b", 256, "decode"), ("llama-3-8b", 256, "prefill")]
    assert wr.points_that_do_not_fit(pts, cpu) == set()  # a machine of unknown memory judges nothing
    fig = wr.plot_roofline(pts, h100)
    assert "open: its KV cache does not fit" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "open: its KV cache" not in str([t.get_text() for t in wr.plot_roofline(pts[:2], h100).axes[0].get_legend().get_texts()])


def test_names_from_code_stay_as_written_in_a_chinese_table():
    """The bridge's names from code (lib's, vLLM's files and names, the engine argument) are lib.text.Code: a table
    in Chinese translates the idea (水位线) and leaves the parameter a teacher copies into a config as it is."""
    from lib.i18n import speaking
    from lib.text import Code, text_table

    rows = [r for r in vb.bridge_rows() if r["idea"] == "watermark"]
    assert isinstance(rows[0]["engine argument"], Code) and rows[0]["engine argument"] == "watermark"
    with speaking("zh"):
        table = text_table([{k: r[k] for k in ("idea", "engine argument")} for r in rows])
    assert table.splitlines()[-1].split() == ["水位线", "watermark"]


def test_tensor_parallelism_splits_the_weights_and_the_kv_heads_per_gpu():
    caps = {tp: vb.kv_capacity("llama-3-8b", "H100 SXM", tensor_parallel_size=tp) for tp in (1, 2, 4)}
    assert caps[1] == vb.kv_capacity("llama-3-8b", "H100 SXM")  # the default is one GPU, as before
    for tp, c in caps.items():
        assert (c.tensor_parallel_size, c.kv_heads_per_gpu) == (tp, 8 // tp)
        assert c.block_bytes * tp == caps[1].block_bytes  # 1/TP of the KV heads: 1/TP of each block, per GPU
        assert c.weights == costs.weight_bytes_per_gpu("llama-3-8b", tp, "bf16")
        assert c.num_blocks == (c.requested - c.weights) // c.block_bytes
    assert caps[4].tokens > 4 * caps[1].tokens  # smaller blocks and smaller weights: more than TP times the tokens
    assert vb.max_sequences("llama-3-8b", 4096, tensor_parallel_size=2) == caps[2].usable_blocks // 256
    # a 70B model starts from TP=2 on H100s; 8 KV heads over 16 GPUs: one replicated head each
    assert not vb.kv_capacity("llama-3-70b", "H100 SXM").starts
    assert vb.kv_capacity("llama-3-70b", "H100 SXM", tensor_parallel_size=2).starts
    c16 = vb.kv_capacity("llama-3-70b", "H100 SXM", tensor_parallel_size=16)
    assert c16.kv_heads_per_gpu == 1 and c16.block_bytes * 8 == vb.kv_capacity("llama-3-70b", "H200 SXM").block_bytes
    with pytest.raises(ValueError, match=r"tensor_parallel_size=3 .*allowed: 1, 2, 4, 8, 16, 32"):
        vb.kv_capacity("llama-3-8b", "H100 SXM", tensor_parallel_size=3)
