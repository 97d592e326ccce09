"""The build-it exercises of the real machinery (lib/exercises/machinery.py) tell each typical wrong solution
what it got wrong, in the course's words: a loop without a cache, lib's cache instead of one's own, a loop that
feeds the whole text again at a step, feeds a stale token, writes over a position instead of appending, writes at
the wrong position or never advances its offset; a round without rollback or cropped one position short, blocks
laid out in the wrong order."""
import pytest
import torch

import lib
import lib.exercises as ex
from lib.exercises.machinery import PreallocatedKVCache


@pytest.fixture(autouse=True)
def fresh_tries():
    ex.reset()
    yield
    ex.reset()


def _greedy(model, ids, n, make_cache=PreallocatedKVCache, *, refeed=False, stale=None):
    """A cached greedy loop with one slip switched on: ``refeed`` feeds the whole text every step, ``stale``
    ("prompt" or "previous") feeds an old token instead of the newest."""
    cache = make_cache(model.config, len(ids) + n) if make_cache else None
    out = []
    logits = model(torch.tensor([ids]), cache=cache)
    for _ in range(n):
        out.append(int(logits[0, -1].argmax()))
        if refeed or cache is None:
            feed = ids + out
        elif stale == "prompt":
            feed = [ids[-1]]
        elif stale == "previous" and len(out) > 1:
            feed = [out[-2]]
        else:
            feed = [out[-1]]
        logits = model(torch.tensor([feed]), cache=cache)
    return out


class Overwrites(PreallocatedKVCache):
    """Writes every pass at the buffer's start (and hands back only that) instead of appending at seq_len."""
    def _write(self, layer, k, v):
        T = k.shape[2]
        self.k[layer][:, :, :T], self.v[layer][:, :, :T] = k, v
        return self.k[layer][:, :, :T], self.v[layer][:, :, :T]


class NeverAdvances(PreallocatedKVCache):
    """commit() forgets to move the offset on."""
    def commit(self):
        self._pending = 0


class AdvancesPerLayer(PreallocatedKVCache):
    """Moves the offset on inside _write, once per layer, instead of once per pass in commit()."""
    def _write(self, layer, k, v):
        out = super()._write(layer, k, v)
        self.seq_len += k.shape[2]
        return out

    def commit(self):
        self._pending = 0


class OneAhead(PreallocatedKVCache):
    """Writes one position too far on (at seq_len + 1)."""
    def _write(self, layer, k, v):
        start, end = self.seq_len + 1, self.seq_len + 1 + k.shape[2]
        self.k[layer][:, :, start:end], self.v[layer][:, :, start:end] = k, v
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]


def _said(wrong):
    result = ex.check("cache_in_your_loop", wrong, quiet=True)
    assert not result.passed and "case 1 of 3" in result.message, result.message
    return result.message


def test_the_solution_passes_and_lib_caches_or_no_cache_are_named():
    assert ex.check("cache_in_your_loop", lambda m, i, n: _greedy(m, i, n), quiet=True).passed
    assert "never handed the model a cache" in _said(lambda m, i, n: _greedy(m, i, n, None))
    assert "that is lib's KVCache" in _said(lambda m, i, n: _greedy(m, i, n, lambda c, L: lib.KVCache(c, 1, L)))


def test_feeding_the_whole_text_again_names_the_step_and_the_text_decoded_not_a_full_cache():
    msg = _said(lambda m, i, n: _greedy(m, i, n, refeed=True))
    tok = lib.load_demo("lm")[1]
    ids = tok.encode(lib.lm.LOOP_PROMPT)
    first = lib.generate(lib.load_demo("lm")[0], ids, 1).new_tokens[0].tolist()
    assert f"step 1 fed {len(ids) + 1} tokens, {tok.decode(ids + first)!r}" in msg, msg
    assert f"a decode step feeds only the newest token (the cache holds the {len(ids)} before it already)" in msg
    assert "max_len >=" not in msg and "KV cache is full" not in msg  # not sent to a bigger cache
    assert "then it raised ValueError" in msg


def test_a_stale_token_is_named_with_where_it_came_from():
    prompt = _said(lambda m, i, n: _greedy(m, i, n, stale="prompt"))
    assert "step 1 fed '\\n', a stale token (from the prompt): feed the newest token, the argmax of the logits " \
           "step 0 returned" in prompt, prompt
    previous = _said(lambda m, i, n: _greedy(m, i, n, stale="previous"))
    assert "step 2 fed" in previous and "a stale token (the 1st new token)" in previous, previous
    assert "the argmax of the logits step 1 returned" in previous


def test_overwriting_instead_of_appending_names_the_position_written_and_the_one_expected():
    n_prompt = len(lib.load_demo("lm")[1].encode(lib.lm.LOOP_PROMPT))
    msg = _said(lambda m, i, n: _greedy(m, i, n, Overwrites))
    assert f"at step 1, layer 0 your _write wrote position 0 where {n_prompt} was expected: it wrote over a " \
           f"cached position instead of appending after the {n_prompt} cached ones" in msg, msg
    ahead = _said(lambda m, i, n: _greedy(m, i, n, OneAhead))
    assert "at step 0, layer 0 your _write wrote position 1 where 0 was expected" in ahead, ahead


def test_an_offset_that_never_advances_or_advances_per_layer_is_named():
    n_prompt = len(lib.load_demo("lm")[1].encode(lib.lm.LOOP_PROMPT))
    never = _said(lambda m, i, n: _greedy(m, i, n, NeverAdvances))
    assert "after step 0 seq_len is still 0: the offset never advanced; commit() must move it on by the " \
           f"{n_prompt} position(s) this pass wrote" in never, never
    per_layer = _said(lambda m, i, n: _greedy(m, i, n, AdvancesPerLayer))
    assert f"at step 0, layer 1 your _write wrote position {n_prompt} where 0 was expected" in per_layer, per_layer


def test_a_wrong_token_is_decoded_and_counted_from_one_without_the_expected_one():
    model, tok = lib.load_demo("lm")
    ids = tok.encode(lib.lm.LOOP_PROMPT)
    want = lib.generate(model, ids, 12).new_tokens[0].tolist()

    def third_wrong(m, i, n):
        out = _greedy(m, i, n)
        out[2] = tok.encode("Z")[0] if out[2] != tok.encode("Z")[0] else tok.encode("Q")[0]
        return out

    msg = _said(third_wrong)
    assert "your 3rd new token is 'Z', which is not the greedy choice there; the 2 before it are right" in msg, msg
    assert repr(tok.decode([want[2]])) not in msg.split("there")[0].split("token is")[1]


def test_the_messages_speak_chinese():
    from lib.i18n import speaking
    with speaking("zh"):
        never = ex.check("cache_in_your_loop", lambda m, i, n: _greedy(m, i, n, NeverAdvances), quiet=True).message
        stale = ex.check("cache_in_your_loop", lambda m, i, n: _greedy(m, i, n, stale="previous"), quiet=True).message
    assert "第 0 步之后 seq_len 仍是 0：偏移一直没有前移" in never and "提示 1/3（先想一个问题）" in never, never
    assert "第 2 步输入的 '一' 是个过时的 token（第 1 个新 token）" in stale and "提示 2/3（指个方向）" in stale, stale
    assert "即第 1 步返回的 logits 的 argmax" in stale


