"""The shipped demo models: their phrases, their sizes, safe loading, and rebuilding them by command."""
import json
import shutil

import pytest
import torch
from safetensors import safe_open

from lib import DEMOS, generate, load_checkpoint, load_demo
from lib.demo import ASSETS, demo_info, demo_path
from lib.corpus import corpus_tokenizer
from lib.train import SPECS, greedy_continuation, train


@pytest.mark.parametrize("name", list(DEMOS))
def test_each_demo_still_produces_its_phrases(name):
    model, tok = load_demo(name)
    for prompt, expected in SPECS[name].expect.items():
        assert greedy_continuation(model, tok, prompt) == expected


def test_the_source_examples_exactly():
    model, tok = load_demo("chat")
    out = generate(model, tok.encode("<s>"), 10, eos_id=tok.eos_id).sequences[0]
    assert tok.tokens(out) == ["<s>", "人", "工", "智", "能", "<eos>"]
    tiny, tok4 = load_demo("tiny")
    assert tiny.config.n_layers == 2 and tiny.config.d_model == 4 and tiny.config.n_heads == 1
    out = generate(tiny, tok4.encode("<s>"), 8, eos_id=tok4.eos_id).sequences[0]
    assert tok4.decode(out) == "<s>深度学习<eos>"


def test_all_demos_share_one_vocabulary_and_are_small():
    toks = [load_demo(n)[1] for n in DEMOS]
    assert all(t == toks[0] for t in toks) and toks[0] == corpus_tokenizer()
    for name in DEMOS:
        assert demo_path(name).stat().st_size < 2_000_000
    chat, draft = load_demo("chat")[0], load_demo("draft")[0]
    assert draft.num_parameters() < chat.num_parameters() / 5


def test_metadata_records_how_it_was_made():
    info = demo_info("chat")
    assert info["command"] == "python -m lib.train chat" and info["steps"] == SPECS["chat"].steps
    with safe_open(str(demo_path("chat")), framework="pt") as f:
        assert json.loads(f.metadata()["config"])["n_layers"] == 4


def test_load_demo_device_and_dtype(device):
    model, _ = load_demo("chat", device=device, dtype="bf16")
    assert model.device.type == device.type and model.dtype == torch.bfloat16 and not model.training


def test_unknown_demo_name():
    with pytest.raises(ValueError, match=r"unknown demo model 'gpt5'; available: chat, draft, tiny"):
        load_demo("gpt5")


def test_truncated_and_garbage_files_give_clear_errors(tmp_path):
    src = demo_path("chat").read_bytes()
    (tmp_path / "truncated.safetensors").write_bytes(src[: len(src) // 2])
    (tmp_path / "garbage.safetensors").write_bytes(b"\x00" * 100)
    for name in ("truncated", "garbage"):
        with pytest.raises(ValueError, match=rf"{name}.safetensors is not a readable safetensors checkpoint"):
            load_checkpoint(tmp_path / f"{name}.safetensors")
    with pytest.raises(FileNotFoundError, match=r"no checkpoint at"):
        load_checkpoint(tmp_path / "missing.safetensors")


def test_pickles_are_refused(tmp_path):
    model, _ = load_demo("tiny")
    torch.save(model.state_dict(), tmp_path / "pickled.safetensors")  # a pickle under a safetensors name
    with pytest.raises(ValueError, match=r"not a readable safetensors checkpoint"):
        load_checkpoint(tmp_path / "pickled.safetensors")


def test_a_file_that_does_not_fit_its_config(tmp_path):
    from safetensors.torch import save_file
    model, tok = load_demo("tiny")
    with safe_open(str(demo_path("tiny")), framework="pt") as f:
        meta = f.metadata()
        state = {k: f.get_tensor(k) for k in f.keys()}
    state.pop("norm_f.weight")
    save_file(state, str(tmp_path / "bad.safetensors"), metadata=meta)
    with pytest.raises(ValueError, match=r"does not match its config: missing \['norm_f.weight'\]"):
        load_checkpoint(tmp_path / "bad.safetensors")


def test_training_command_rebuilds_the_shipped_weights():
    """`python -m lib.train tiny` is deterministic: it reproduces the shipped file's tensors."""
    model, _, info = train("tiny", verbose=False)
    shipped, _ = load_demo("tiny")
    for (k, a), (_, b) in zip(sorted(model.state_dict().items()), sorted(shipped.state_dict().items())):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0, msg=lambda m: f"{k}: {m}")
    assert info["final_loss"] == pytest.approx(demo_info("tiny")["final_loss"], abs=1e-5)
