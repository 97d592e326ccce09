"""The build-it exercises of notebooks 01-04 (lib/exercises/basics.py): each catches the mistake a learner is
likely to make, with a message that says which case failed and how, without the expected numbers."""
import math

import torch

import lib.exercises as ex
from lib.exercises import basics
from lib.model import apply_rope, rope_tables


def message(name, fn):
    result = ex.check(name, fn, quiet=True)
    assert not result.passed and "\n  Hint " in result.message
    return result.message


def test_causal_attention_without_the_mask_or_the_scale_fails():
    def no_mask(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v

    def no_scale(q, k, v):
        T = q.shape[-2]
        s = (q @ k.transpose(-2, -1)).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        return torch.softmax(s, -1) @ v

    assert "case 1 of 3" in message("causal_attention", no_mask) and "values are off" in message("causal_attention", no_mask)
    assert "values are off" in message("causal_attention", no_scale)


def test_greedy_loop_that_ignores_eos_or_the_last_position_fails():
    def ignores_eos(model, ids, n, eos_id):
        return basics.greedy_loop_solution(model, ids, n, None)

    def first_position(model, ids, n, eos_id):
        ids = list(ids)
        for _ in range(n):
            ids.append(int(model(torch.tensor([ids]))[0, 0].argmax()))
            if ids[-1] == eos_id:
                break
        return ids

    assert "items, which is not the expected number" in message("greedy_loop", ignores_eos)
    msg = message("greedy_loop", first_position)
    assert "case 2 of 4" in msg or "case 1 of 4" in msg


def test_append_key_at_the_wrong_offset_or_unrotated_fails():
    def off_by_one(cache_k, seq_len, k_new, theta):
        return basics.append_key_solution(cache_k, seq_len, k_new, theta) if seq_len == 0 else \
            basics.append_key_solution(cache_k, seq_len - 1, k_new, theta)

    def unrotated(cache_k, seq_len, k_new, theta):
        cache_k[:, seq_len] = k_new
        return cache_k

    def rotated_at_zero(cache_k, seq_len, k_new, theta):
        cos, sin = rope_tables(k_new.shape[-1], torch.tensor([[0]]), theta)
        cache_k[:, seq_len] = apply_rope(k_new[None, :, None, :], cos, sin)[0, :, 0]
        return cache_k

    for wrong in (off_by_one, unrotated, rotated_at_zero):
        msg = message("append_key", wrong)
        assert "case 1 of 3 (5 tokens cached in a buffer of 8 positions" in msg and "values are off" in msg


def test_append_key_checks_the_whole_buffer():
    def new_tensor(cache_k, seq_len, k_new, theta):  # returns only the rows up to the new one
        return basics.append_key_solution(cache_k, seq_len, k_new, theta)[:, :seq_len + 1]

    assert "which is not the expected shape" in message("append_key", new_tensor)


def test_attention_row_without_the_scale_fails_and_the_answer_stays_hidden():
    def no_scale(q, keys, values):
        w = torch.softmax(keys @ q, -1)
        return w, w @ values

    msg = message("attention_row", no_scale)
    assert "item 0 of your result" in msg and "values are off" in msg
    ex._load_all()
    for case in ex._REGISTRY["attention_row"].cases():
        for t in case.expected:
            assert f"{float(t.flatten()[0]):.4f}" not in msg

