"""lib.hf.from_hf: a converted Hugging Face model behaves exactly like the original.

Small randomly initialised models of each family, built in memory from transformers' config classes. Every
parameter is re-randomised first: transformers' own init zeroes the biases and sets norm weights to 1, which
would hide a dropped q/k/v bias, swapped norms or the wrong GELU. The checks: logits (fp32, atol 1e-5), greedy
tokens against ``generate`` (with an attention mask), and the keys and values in lib's cache against
transformers' cache, layer by layer (after RoPE).
"""
import importlib
import json
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")

import lib  # noqa: E402
from lib.hf import (ENV_VAR, HOW_TO, HFTokenizer, UnsupportedModelError, config_from_hf, from_hf,  # noqa: E402
                    load_from_env, load_hf, load_tokenizer, require_transformers)

ATOL = 1e-5
VOCAB = 64
NO_SPECIAL = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)  # no early stop in generate()


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models: one thread is fastest (on a busy 2-core machine two spinning threads are ~100x slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def llama_kw(**kw):
    base = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=48, rope_parameters={"rope_type": "default",
                                                                                     "rope_theta": 500.0})
    return {**base, **NO_SPECIAL, **kw}


def gpt2_kw(**kw):
    return {**dict(vocab_size=VOCAB, n_positions=48, n_embd=32, n_layer=2, n_head=4), **NO_SPECIAL, **kw}


# family name -> (model class, config class, config kwargs)
CASES = {
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", gpt2_kw()),
    "gpt2-untied-exact-gelu": ("GPT2LMHeadModel", "GPT2Config",
                               gpt2_kw(tie_word_embeddings=False, activation_function="gelu", n_inner=40)),
    "llama-gqa": ("LlamaForCausalLM", "LlamaConfig", llama_kw()),
    "llama-head-dim-16-biases": ("LlamaForCausalLM", "LlamaConfig", llama_kw(head_dim=16, attention_bias=True)),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", llama_kw(num_key_value_heads=1, rms_norm_eps=1e-6)),
    "qwen2-tied": ("Qwen2ForCausalLM", "Qwen2Config", llama_kw(tie_word_embeddings=True)),
    "mistral": ("MistralForCausalLM", "MistralConfig", llama_kw(sliding_window=None, num_key_value_heads=4)),
}


def rerandomise(model, seed=0):
    """Give every parameter random values: norm weights around 1, everything else around 0."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            is_norm = p.dim() == 1 and ("norm" in name or ".ln_" in name) and name.endswith("weight")
            p.copy_(1 + 0.3 * noise if is_norm else 0.2 * noise)
    return model


def build(case, seed=0, **changes):
    model_cls, config_cls, kw = CASES[case]
    torch.manual_seed(seed)
    hf = getattr(transformers, model_cls)(getattr(transformers, config_cls)(**{**kw, **changes})).eval()
    before = {n: p.detach().clone() for n, p in hf.named_parameters()}
    rerandomise(hf, seed)
    unchanged = [n for n, p in hf.named_parameters() if torch.equal(p, before[n])]
    assert not unchanged, f"not re-randomised: {unchanged}"
    return hf


def hf_kv(cache, layer):
    """Keys and values of one layer of transformers' cache, (B, n_kv_heads, T, head_dim)."""
    return cache.layers[layer].keys, cache.layers[layer].values


@pytest.fixture(params=list(CASES))
def pair(request):
    hf = build(request.param)
    return request.param, hf, from_hf(hf)


def prompt(batch=2, length=7, seed=1):
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------------------------ same behaviour

def test_config_is_read_from_the_hf_config(pair):
    name, hf, model = pair
    c, h = model.config, hf.config
    assert model.num_parameters() == sum(p.numel() for p in hf.parameters()) + (
        # Llama with attention_bias but no mlp_bias: lib holds zero FFN biases
        (2 * 48 + 32) * 2 if name == "llama-head-dim-16-biases" else 0)
    assert c.tie_embeddings == h.tie_word_embeddings
    assert (model.lm_head.weight is model.tok_emb.weight) == h.tie_word_embeddings
    if name.startswith("gpt2"):
        assert (c.norm, c.positions) == ("layernorm", "learned")
        assert c.activation == {"gelu_new": "gelu_tanh", "gelu": "gelu"}[h.activation_function]
    else:
        assert (c.norm, c.positions, c.activation) == ("rmsnorm", "rope", "swiglu")
        assert c.rope_theta == 500.0 and c.n_kv_heads == h.num_key_value_heads and c.norm_eps == h.rms_norm_eps
        assert c.head_dim == (16 if "head-dim-16" in name else 8)
        assert c.qkv_bias == name.startswith(("qwen2", "llama-head-dim-16-biases"))


def test_logits_match(pair):
    _, hf, model = pair
    ids = prompt()
    with torch.no_grad():
        expected = hf(ids).logits
        got = model(ids)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


def test_cached_logits_match_chunk_by_chunk(pair):
    """Prefill 4 tokens, then feed 1, 2 and 1 more: every chunk's logits equal transformers' (with its cache)."""
    _, hf, model = pair
    ids = prompt(batch=2, length=8)
    cache = lib.KVCache(model.config, 2, 8)
    hf_cache = transformers.DynamicCache(config=hf.config)
    with torch.no_grad():
        for a, b in ((0, 4), (4, 5), (5, 7), (7, 8)):
            expected = hf(ids[:, a:b], cache=hf_cache, use_cache=True).logits
            torch.testing.assert_close(model(ids[:, a:b], cache=cache), expected, atol=ATOL, rtol=0)


def test_greedy_tokens_and_cache_match_generate(pair):
    _, hf, model = pair
    ids = prompt(batch=2, length=5)
    n_new = 24
    expected = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_new, do_sample=False,
                           return_dict_in_generate=True)
    out = lib.generate(model, ids, n_new)
    assert out.sequences.tolist() == expected.sequences.tolist()
    # the last token is never fed back: both caches hold prompt + n_new - 1 positions
    assert out.cache.seq_len == expected.cache.get_seq_length() == 5 + n_new - 1
    for layer in range(model.config.n_layers):
        k, v = hf_kv(expected.cache, layer)
        torch.testing.assert_close(out.cache.keys(layer), k, atol=ATOL, rtol=0)
        torch.testing.assert_close(out.cache.values(layer), v, atol=ATOL, rtol=0)


def test_the_checks_would_catch_the_classic_conversion_bugs():
    """With re-randomised weights each classic bug moves the logits far beyond the tolerance."""
    ids = prompt()

    def gap(hf, model):
        with torch.no_grad():
            return float((hf(ids).logits - model(ids)).abs().max())

    qwen = build("qwen2")
    model = from_hf(qwen)
    assert gap(qwen, model) < ATOL
    with torch.no_grad():
        model.blocks[0].attn.q_proj.bias.zero_()  # a dropped q bias
    assert gap(qwen, model) > 100 * ATOL

    model = from_hf(qwen)
    with torch.no_grad():  # swapped norms
        a, b = model.blocks[1].norm1.weight, model.blocks[1].norm2.weight
        a_old = a.clone()
        a.copy_(b)
        b.copy_(a_old)
    assert gap(qwen, model) > 100 * ATOL

    gpt2 = build("gpt2")
    model = from_hf(gpt2)
    assert gap(gpt2, model) < ATOL
    for block in model.blocks:  # exact GELU instead of GPT-2's tanh approximation
        block.mlp.activation = "gelu"
    assert gap(gpt2, model) > 10 * ATOL


def test_the_copy_is_independent_and_keeps_or_sets_the_dtype():
    hf = build("llama-gqa")
    model = from_hf(hf)
    with torch.no_grad():
        model.tok_emb.weight.zero_()
    assert hf.model.embed_tokens.weight.abs().sum() > 0
    half = from_hf(hf, dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16
    assert torch.equal(half.blocks[0].attn.k_proj.weight, hf.model.layers[0].self_attn.k_proj.weight.bfloat16())
    assert from_hf(hf.to(torch.bfloat16)).dtype == torch.bfloat16  # default: the checkpoint's own dtype


def test_max_seq_len_shortens_the_learned_position_table():
    hf = build("gpt2")
    model = from_hf(hf, max_seq_len=16)
    assert model.config.max_seq_len == 16 and model.pos_emb.weight.shape == (16, 32)
    ids = prompt(length=16)
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, atol=ATOL, rtol=0)


def test_qwen2_head_dim_none_falls_back_to_hidden_over_heads():
    cfg = transformers.Qwen2Config(**llama_kw())
    cfg.head_dim = None  # what a Qwen2 config.json without head_dim reads as
    assert config_from_hf(cfg, "Qwen2ForCausalLM").head_dim == 8


# ------------------------------------------------------------------------------- sliding windows

def test_sliding_window_is_refused_beyond_the_window_and_exact_within_it():
    kw = llama_kw(sliding_window=16)
    hf = rerandomise(transformers.MistralForCausalLM(transformers.MistralConfig(**kw)).eval())
    with pytest.raises(UnsupportedModelError, match=r"sliding-window attention .* last 16 positions.*"
                                                    r"Pass max_seq_len=16"):
        from_hf(hf)
    model = from_hf(hf, max_seq_len=16)
    ids = prompt(length=16)
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, atol=ATOL, rtol=0)


# ------------------------------------------------------------------------------------ clear errors

@pytest.mark.parametrize("config_cls, kw, match", [
    ("LlamaConfig", llama_kw(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}),
     r"RoPE scaling of type 'linear'.*plain RoPE only"),
    ("LlamaConfig", llama_kw(hidden_act="gelu"), r"hidden_act='gelu' is not supported; .*SwiGLU"),
    ("GPT2Config", gpt2_kw(activation_function="relu"), r"activation_function='relu' is not supported; lib has "),
    ("GPT2Config", gpt2_kw(scale_attn_by_inverse_layer_idx=True), r"scale_attn_by_inverse_layer_idx=True"),
])
def test_unsupported_settings_are_named(config_cls, kw, match):
    cfg = getattr(transformers, config_cls)(**kw)
    arch = "GPT2LMHeadModel" if config_cls == "GPT2Config" else "LlamaForCausalLM"
    with pytest.raises(UnsupportedModelError, match=match):
        config_from_hf(cfg, arch)


def test_partial_rotary_factor_is_refused():
    cfg = transformers.LlamaConfig(**llama_kw())
    cfg.rope_parameters = {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}
    with pytest.raises(UnsupportedModelError, match=r"partial_rotary_factor=0.5.*whole head_dim"):
        config_from_hf(cfg, "LlamaForCausalLM")


def test_other_architectures_and_types_are_refused():
    supported = r"GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM"
    with pytest.raises(UnsupportedModelError, match=r"LlamaModel is not supported; from_hf converts " + supported):
        from_hf(transformers.LlamaModel(transformers.LlamaConfig(**llama_kw())))  # no lm_head
    with pytest.raises(UnsupportedModelError, match=r"'opt' is not supported"):
        config_from_hf(transformers.OPTConfig(), "opt")
    with pytest.raises(TypeError, match=r"from_hf takes a transformers model or the path .* got int"):
        from_hf(42)


def test_parameters_without_a_place_are_named():
    hf = build("llama-gqa")
    hf.register_parameter("extra_scale", torch.nn.Parameter(torch.ones(3)))
    with pytest.raises(UnsupportedModelError, match=r"parameters lib has no place for: extra_scale"):
        from_hf(hf)


def test_max_seq_len_must_fit_the_context_window():
    with pytest.raises(ValueError, match=r"max_seq_len must be an integer from 1 to .* \(48 positions\), got 49"):
        from_hf(build("gpt2"), max_seq_len=49)


def test_missing_transformers_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ImportError, match=r'optional `transformers` package.*pip install -e "\.\[hf\]"'):
        require_transformers()


# ------------------------------------------------------------------------- checkpoint folders (offline)

CORPUS = ["the kv cache keeps the keys and values of earlier tokens",
          "each decode step reads the cache instead of computing it again"] * 4
TOKENIZER_VOCAB = 300  # 256 byte symbols + merges


def save_tokenizer(folder):
    """A small byte-level BPE tokenizer trained here (no download), saved the way real checkpoints are."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=TOKENIZER_VOCAB, special_tokens=["<eos>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(CORPUS, trainer)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>")
    tok.save_pretrained(folder)


@pytest.fixture(scope="module", params=["gpt2", "qwen2-tied"])
def checkpoint(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    hf = build(request.param, vocab_size=TOKENIZER_VOCAB)
    hf.save_pretrained(folder)
    save_tokenizer(folder)
    return folder, hf


def test_round_trip_through_a_local_checkpoint_folder(checkpoint):
    folder, hf = checkpoint
    assert any(folder.glob("*.safetensors")) and (folder / "config.json").is_file()
    model = from_hf(folder)
    from_memory = from_hf(hf)
    for (name, a), (_, b) in zip(model.state_dict().items(), from_memory.state_dict().items()):
        assert torch.equal(a, b), name
    ids = prompt()
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, atol=ATOL, rtol=0)
    assert from_hf(str(folder), max_seq_len=20).config.max_seq_len == 20


def test_tokenizer_from_the_folder_has_lib_s_interface(checkpoint):
    folder, _ = checkpoint
    model, tok = load_hf(folder)
    assert isinstance(tok, HFTokenizer) and isinstance(load_tokenizer(folder), HFTokenizer)
    text = "the kv cache keeps the keys"
    ids = tok.encode(text)
    assert 1 < len(ids) < len(text)  # merged pieces, not one id per character
    assert "".join(tok.tokens(ids)) == text == tok.decode(torch.tensor(ids))
    pieces = tok.tokens(ids)
    assert pieces[0] == "the" and " cache" in pieces and not any("Ġ" in p for p in pieces)  # a space, not Ġ
    # the wrapper reports what the tokenizer itself says (AutoTokenizer may pick the family's own class)
    assert tok.eos_id == tok.hf.eos_token_id is not None and tok.vocab_size == len(tok.hf) >= TOKENIZER_VOCAB
    assert tok.pad_id == (tok.eos_id if tok.hf.pad_token_id is None else tok.hf.pad_token_id)
    out = lib.generate(model, ids, 5, eos_id=tok.eos_id)
    assert tok.decode(out.sequences[0]).startswith(text)


def test_folder_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"'gpt2' is not a local folder\. from_hf never downloads"):
        from_hf("gpt2")
    with pytest.raises(FileNotFoundError, match=r"has no config\.json"):
        from_hf(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**gpt2_kw(), "model_type": "gpt2",
                                                      "architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(FileNotFoundError, match=r"has no \*\.safetensors weights; .*never pickled \.bin"):
        from_hf(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "opt", "architectures": ["OPTForCausalLM"]}))
    with pytest.raises(UnsupportedModelError, match=r"\['OPTForCausalLM'\].*from_hf converts GPT2LMHeadModel"):
        from_hf(tmp_path)


# ------------------------------------------------------------------------- the notebook's section

def test_load_from_env_without_the_variable_prints_the_fixed_how_to(capsys):
    assert load_from_env({}) is None
    assert capsys.readouterr().out == HOW_TO + "\n"
    assert ENV_VAR in HOW_TO and 'pip install -e ".[hf]"' in HOW_TO


def test_load_from_env_loads_the_folder(checkpoint, capsys):
    folder, _ = checkpoint
    model, tok = load_from_env({ENV_VAR: str(folder)})
    assert isinstance(model, lib.MiniTransformer) and isinstance(tok, HFTokenizer)
    assert capsys.readouterr().out.startswith(f"loaded {folder}: 2 layers, d_model 32, 4 heads (")


def test_load_from_env_explains_a_bad_folder_or_a_missing_package(tmp_path, capsys, monkeypatch):
    assert load_from_env({ENV_VAR: str(tmp_path / "nope")}) is None
    assert "could not be loaded: " in capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "transformers", None)
    assert load_from_env({ENV_VAR: str(tmp_path)}) is None
    assert 'is set, but lib.hf needs the optional `transformers` package' in capsys.readouterr().out


def test_player_and_heat_map_run_on_a_converted_model(checkpoint):
    from lib.widgets.attention import AttentionExplorer
    from lib.widgets.player import GenerationPlayer

    folder, _ = checkpoint
    model, tok = load_hf(folder)
    player = GenerationPlayer(model, tok, prompt="the kv cache", max_new_tokens=6)
    assert player.message == "" and len(player.frames) == 6
    player.next()
    state = player.state()
    prompt_ids = tok.encode("the kv cache")
    assert [c["text"] for c in state["frame"]["chips"][:len(prompt_ids)]] == tok.tokens(prompt_ids)
    cached, uncached = player.traces
    assert cached.tokens() == uncached.tokens()
    explorer = AttentionExplorer(model, tok, prompt="the kv cache", max_new_tokens=6)
    assert explorer.error is None and len(explorer.trace) == 6
    explorer.set(layer=1, head=2, step=3)
    assert explorer.drawn["layer"] == 1 and explorer.drawn["head"] == 2


def test_attn_impl_sdpa_gives_the_same_numbers_and_bad_values_are_named():
    hf = build("llama-gqa")
    fast = from_hf(hf, attn_impl="sdpa")
    assert fast.config.attn_impl == "sdpa"
    ids = prompt()
    with torch.no_grad():
        torch.testing.assert_close(fast(ids), hf(ids).logits, atol=ATOL, rtol=0)
    with pytest.raises(ValueError, match=r"attn_impl='flash' is not supported; allowed: manual, sdpa"):
        from_hf(hf, attn_impl="flash")


# ------------------------------------------------- every widget takes your own model (the course's main path)

def test_every_widget_and_figure_factory_takes_a_converted_model(checkpoint):
    """The widgets that run a model take lib.from_hf's model and its HFTokenizer as they take lm; the explorers
    that work from shapes alone (memory, cost curves, roofline, vLLM capacity) take the model (or its config)
    and add it to their picker as "your model"."""
    from lib.widgets import (YOUR_MODEL, attention, blocks, capacity, cost_curves, memory, player, ring,
                             roofline, sampling, speculative, tiles, worked)

    folder, _ = checkpoint
    model, tok = load_hf(folder)
    text = "the kv cache keeps the keys"
    ids = torch.tensor([tok.encode(text)])  # (1, T), T < the model's 48 positions
    assert sampling.SamplingExplorer(model, tok, prompt=text).state.vocab_size == model.config.vocab_size
    spec = speculative.SpeculativeExplorer(model, model, tok, prompt=text, max_new_tokens=6)
    assert spec.message == "" and spec.result.sequences.shape[1] == ids.shape[1] + 6
    assert worked.WorkedExplorer(model, tok, prompt=text, max_new_tokens=4).error is None
    pool = blocks.BlockPoolWidget(model, tok, prompts=(text, "the keys", "the keys"))
    assert not pool.error and pool.frames
    assert len(tiles.TileStepper(model, ids, block_size=4, row=len(ids[0]) - 1).frames) > 1
    assert len(ring.RingStepper(model, tok, ids[0], window=4, sinks=1).frames) == ids.shape[1]
    assert attention.AttentionExplorer(model, tok, prompt=text, max_new_tokens=3).error is None
    assert len(player.GenerationPlayer(model, tok, prompt=text, max_new_tokens=3).frames) == 3
    for explorer in (memory.MemoryExplorer(model), capacity.CapacityExplorer(model, "H100 SXM"),
                     roofline.RooflineExplorer(model), cost_curves.CostCurvesExplorer(model, n=16)):
        picker = {memory.MemoryExplorer: lambda e: e.model_box, capacity.CapacityExplorer: lambda e: e.boxes["model"],
                  roofline.RooflineExplorer: lambda e: e.controls["model"],
                  cost_curves.CostCurvesExplorer: lambda e: e.model}[type(explorer)](explorer)
        assert picker.value == YOUR_MODEL and (YOUR_MODEL, YOUR_MODEL) in picker.options, type(explorer).__name__
    assert memory.MemoryExplorer(model.config).budget.config == model.config  # a config works as the model does
    assert capacity.CapacityExplorer(model).capacity.model == YOUR_MODEL
    assert roofline.RooflineExplorer(model).state["max_seq_len"] == model.config.max_seq_len
    assert memory.MemoryExplorer(lib.PRESETS["llama-2-7b"]).budget.model == "llama-2-7b"  # a preset keeps its name


def test_sampling_labels_a_padded_embedding_and_still_refuses_another_model_s_tokenizer(checkpoint):
    from lib.widgets.sampling import sampling_bars

    folder, _ = checkpoint
    tok = load_tokenizer(folder)
    padded = torch.full((tok.base_vocab_size + 12,), -5.0)  # Qwen2.5-style: rows past the tokenizer
    padded[tok.base_vocab_size + 3], padded[tok.encode("the")[0]] = 4.0, 3.0
    bars = sampling_bars(padded, tok, n_bars=2)
    assert bars.labels[0] == f"#{tok.base_vocab_size + 3}" and bars.labels[1] == "the"
    with pytest.raises(ValueError, match=r"the logits have 10 entries but the tokenizer's base vocabulary has "
                                         r"\d+ tokens .*belong to different models"):
        sampling_bars(torch.zeros(10), tok)
    chat_tok = lib.load_demo("chat")[1]
    with pytest.raises(ValueError, match=r"the tokenizer has \d+ tokens: they belong to different models"):
        sampling_bars(torch.zeros(chat_tok.vocab_size + 1), chat_tok)


def test_a_picker_refuses_what_it_cannot_hold():
    from lib.widgets import picker_models
    from lib.widgets.memory import MemoryExplorer

    with pytest.raises(ValueError, match=r"unknown model 'gpt-5'; allowed"):
        picker_models("gpt-5", lib.PRESETS)
    with pytest.raises(ValueError, match=r"model='chat' is not in the explorer's picker; choose one of: gpt2, .*a "
                                         r"lib.ModelConfig or a model of your own, lib.from_hf\(...\), joins it"):
        picker_models("chat", lib.PRESETS)
    e = MemoryExplorer()
    with pytest.raises(ValueError, match=r"joins it when the explorer is made: MemoryExplorer\(model\)"):
        e.set(model=lib.ModelConfig(vocab_size=10, n_layers=1, d_model=8, n_heads=2, max_seq_len=16))


def test_the_cache_classes_named_beside_libs_exist_in_transformers():
    import transformers.cache_utils as cu
    for name in ("DynamicCache", "StaticCache", "QuantizedCache", "StaticSlidingWindowLayer", "DynamicSlidingWindowLayer"):
        assert hasattr(cu, name), f"transformers {transformers.__version__} has no {name}: re-read cache_utils.py"
    assert {hf for hf, *_ in lib.hf.CACHE_CLASSES if not hf.startswith("(")} <= {
        "DynamicCache", "StaticCache", "StaticCache, sliding layers", "QuantizedCache"}
    homes = [importlib.import_module(m) for m in ("lib", "lib.concat", "lib.paged", "lib.quant")]
    for *_, lib_name, _ in lib.hf.CACHE_CLASSES:  # every lib counterpart named is a class of lib
        name = lib_name.split("(")[0]
        assert any(isinstance(getattr(m, name, None), type) for m in homes), name
