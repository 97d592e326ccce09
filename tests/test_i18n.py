"""Widgets and figures speak the notebook's language (``lib.notebook.setup(lang="zh")`` -> ``lib.i18n``).

Under zh every widget's static figure (titles, axis and tick labels, legends, texts) and its HTML and controls
hold Chinese and no English word beyond the technical tokens a Chinese text keeps (KV, GQA, FLOP, GiB, model
and machine names, ...); every text a widget passes to ``t`` has a Chinese entry with the same placeholders;
the Chinese glyphs are in the shipped font (no "Glyph missing" warning); and switching back to English
restores the English words in the same process.
"""
import ast
import re
from pathlib import Path

import pytest

import lib
from lib import i18n
from lib.i18n import ZH, t
from lib.presets import MODEL_NAMES
from lib.roofline import REFERENCE_MACHINES
from lib.widgets.fonts import FONT_PATH
from tests.helpers import drawn_without_missing_glyphs

WIDGETS = Path(lib.__file__).parent / "widgets"
CJK = re.compile(r"[\u4e00-\u9fff]")
# what a Chinese text keeps in Latin letters: units, technical abbreviations, names of models, machines, formats
KEEP = {"KV", "GQA", "MQA", "MHA", "MLA", "FLOP", "FLOPs", "GFLOP", "TFLOP", "GiB", "KiB", "MiB", "TiB", "GB", "MB",
        "kB", "TB", "ms", "FFN", "top", "ASCII", "CPU", "GPU", "lib", "costs", "Trace", "generate", "chat", "larger",
        "draft", "fp", "bf", "int", "max", "seq", "len", "d_model", "max_seq_len", "log", "pos", "cat", "torch",
        "logit", "eos", "pad", "unk", "tokenizer", "chars", "token", "model", "deepseek"}
KEEP |= {w for name in MODEL_NAMES for w in re.findall(r"[A-Za-z]+", name)}
KEEP |= {w for name in REFERENCE_MACHINES for w in re.findall(r"[A-Za-z]+", str(name))}
KEEP |= {w for m in REFERENCE_MACHINES.values() for w in re.findall(r"[A-Za-z]+", m.name)}


def english_words(text: str, keep=frozenset()) -> set[str]:
    """Latin words of three letters or more that a Chinese text should not hold (tags and <s> left out; ``keep``:
    the words of the model's own text, which a figure shows as it is)."""
    text = re.sub(r"\$[^$]*\$", " ", text)  # matplotlib mathtext (log-axis ticks: $\mathdefault{10^{4}}$)
    text = re.sub(r"<[^>]*>", " ", text)  # HTML tags and special tokens (<s>, <eos>)
    text = re.sub(r"&[a-z]+;|%\{[^}]*\}|[a-z-]+:[^;'\"]*;", " ", text)  # entities, plotly templates, CSS
    return {w for w in re.findall(r"[A-Za-z_]{3,}", text) if w not in KEEP and w not in keep}


def model_words(*texts) -> set[str]:
    """The Latin words (and their pieces) of text the model wrote: a figure shows them as they are."""
    words = {w for s in texts for w in re.findall(r"[A-Za-z_]+", s)}
    return {w[i:j] for w in words for i in range(len(w)) for j in range(i + 1, len(w) + 1)}


def assert_chinese(texts, what, keep=frozenset()):
    texts = [s for s in texts if s and s.strip()]
    assert any(CJK.search(s) for s in texts), f"{what}: no Chinese in {texts}"
    left = {w: s for s in texts for w in english_words(s, keep)}
    assert not left, f"{what}: English word(s) left under zh: {left}"


def figure_texts(fig) -> list[str]:
    """Every text a matplotlib figure shows: titles, axis labels, tick labels, legends (entries and titles),
    annotations, the suptitle and colour-bar labels."""
    out = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [ax.get_title(loc=loc) for loc in ("left", "center", "right")]
        out += [ax.get_xlabel(), ax.get_ylabel()] + [x.get_text() for x in ax.texts]
        out += [x.get_text() for x in ax.get_xticklabels() + ax.get_yticklabels()]
        legend = ax.get_legend()
        if legend is not None:
            out += [x.get_text() for x in legend.get_texts()] + [legend.get_title().get_text()]
    for legend in fig.legends:
        out += [x.get_text() for x in legend.get_texts()] + [legend.get_title().get_text()]
    return out


@pytest.fixture
def zh():
    """Chinese for the test, English again after it (even when it fails)."""
    i18n.set_language("zh")
    yield
    i18n.set_language("en")


# -- the table ---------------------------------------------------------------------------------------------

def _literal_keys():
    for path in sorted(WIDGETS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "t" and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield path.name, arg.value


PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def test_every_text_a_widget_translates_has_a_chinese_entry():
    keys = list(_literal_keys())
    assert len(keys) > 250  # the widgets' words go through t
    missing = sorted({f"{f}: {k!r}" for f, k in keys if k not in ZH})
    assert not missing, f"texts passed to t() without a Chinese entry in lib.i18n.ZH: {missing}"


def test_every_english_text_has_one_entry():
    """A dict literal keeps the last of two equal keys without a word: each English text is written once."""
    table = next(n.value for n in ast.parse(Path(i18n.__file__).read_text(encoding="utf-8")).body
                 if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", None) == "ZH")
    keys = [ast.literal_eval(k) for k in table.keys]
    assert len(keys) == len(set(keys)), sorted({k for k in keys if keys.count(k) > 1})


def _table_entries():
    """(English key, its Chinese, where) for every entry of every translation table as written in lib/i18n/*.py:
    ``ZH``, ``ZH_OUTPUTS`` (merged into ``ZH``) and ``ZH_PRINTED`` (what ``say`` matches first), their updates too."""
    for path in sorted(Path(i18n.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        try:
                            yield k.value, ast.literal_eval(v), f"{path.name}:{k.lineno}"
                        except ValueError:
                            continue  # not a translation (a value computed at import)


def test_one_english_key_means_one_thing_in_every_table():
    """A key written twice with two Chinese texts means two things: whichever table or update comes last wins
    everywhere (08's 剩余分布 was 残差 because the decoder diagram's "residual" came later; 09's pool is full, 池满,
    was 12's full cache). Such a key gets a context per meaning (``"block event\\x04full"``)."""
    seen: dict[str, dict[str, str]] = {}
    for key, zh, where in _table_entries():
        seen.setdefault(key, {}).setdefault(zh, where)
    two = {k: v for k, v in seen.items() if len(v) > 1}
    assert len(seen) > 1500  # every table was read
    assert not two, "one English key, two Chinese texts (give each meaning a context key): " + "; ".join(
        f"{k!r}: " + ", ".join(f"{zh} ({w})" for zh, w in v.items()) for k, v in sorted(two.items()))


def test_a_context_key_keeps_its_meaning_off_the_bare_word():
    """A context key exists because the bare word means something else: the bare word (in ``ZH`` or in
    ``ZH_PRINTED``, which a table's cells go through) never carries the context's Chinese. So a table cell "full" (12's
    full cache) is not 池满, the pool's event, and a bare "static" (a static cache) is not 静态批处理."""
    from lib.i18n import say
    from lib.i18n.outputs import ZH_PRINTED

    with i18n.speaking("zh"):
        assert say("full") != "池满" and t("block event\x04full") == "池满"
        assert t("batching policy\x04static") == "静态批处理" and say("static") == "静态"
        assert t("count row\x04without") == "无缓存" and say("without") == "无"
    # "trace column" and "event code" key every name of one table, a few of which mean the same bare: not a meaning
    namespaces = ("trace column", "event code")
    contexts = {k: v for k, v in ZH.items() if i18n.CONTEXT in k and k.split(i18n.CONTEXT)[0] not in namespaces}
    assert len(contexts) >= 5
    for key, zh in contexts.items():
        bare = key.split(i18n.CONTEXT)[-1]
        assert zh not in (ZH.get(bare), ZH_PRINTED.get(bare)), f"{bare!r} is {zh!r} without its context {key!r}"
    assert t("block event\x04full") == "full" and t("count row\x04without") == "without"


CODE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[./][A-Za-z_][A-Za-z0-9_]*)*(?:\.py|\(\))?")


def identifier_columns(rows) -> list[str]:
    """The columns of a table whose cells name code: most of their cells (dashes aside) are written like a
    parameter, a module path or a file (``block_size``, ``paged.PagedKVPool``, ``v1/core/block_pool.py``)."""
    out = []
    for col in rows[0]:
        cells = [str(r[col]) for r in rows if str(r[col]) not in ("—", "-", "")]
        coded = [c for c in cells if CODE_NAME.fullmatch(c) and re.search(r"[_./]|[a-z][A-Z]|^[A-Z][a-z]+[A-Z]", c)]
        if cells and len(coded) >= 0.6 * len(cells):
            out.append(col)
    return out


def test_a_column_that_names_code_is_never_translated():
    """A column of parameter, class and file names shows in Chinese exactly what it shows in English, every cell,
    even a name that is also an English word (vLLM's engine argument ``watermark``, once 水位线: a teacher who copies
    it into a config gets an error). The idea column beside it is translated."""
    from lib import vllm_bridge as vb
    from lib.text import text_table

    rows = vb.bridge_rows()
    columns = identifier_columns(rows)
    assert {"in lib", "vLLM file", "vLLM name", "engine argument"} <= set(columns) and "idea" not in columns

    def column(col, lang):
        with i18n.speaking(lang):
            return [line.strip() for line in text_table([{col: r[col]} for r in rows]).splitlines()[2:]]

    for col in columns:
        english, chinese = column(col, "en"), column(col, "zh")
        changed = [(e, z) for e, z in zip(english, chinese) if e != z]
        assert not changed, f"{col!r} names code, yet the Chinese table translates {changed}"
    assert "水位线" in column("idea", "zh") and "watermark" in column("engine argument", "zh")


def test_translations_keep_their_placeholders_and_are_chinese():
    for key, zh in ZH.items():
        assert sorted(PLACEHOLDER.findall(key)) == sorted(PLACEHOLDER.findall(zh)), (key, zh)
        # "token" stays token (the glossary's choice), a GPU's size is the same in both
        assert CJK.search(zh) or "（" in zh or zh in {"token", "{g} GiB GPU"}, f"{key!r} -> {zh!r} is not Chinese"


def test_dynamic_words_have_entries():
    """Words that reach t() through a variable: phases, K/V states, concepts, event and frame kinds, options."""
    from lib.widgets import style
    from lib.widgets import blocks, cost_curves, player, speculative, timeline

    words = ([*player.KV_SHORT.values(), *player.KV_MEANING.values(), "prefill", "decode", "recompute",
              *(f"{k} token" for k in player.CHIP_COLORS), "prompt", "generated", "newest", "off", "0 (greedy)",
              style.concept("kept").label, style.concept("removed").label, *cost_curves.MODEL_LABELS.values(),
              *cost_curves.PART_LABELS.values(), *cost_curves.SHOWS, *cost_curves.VIEWS, "linear", "log-log",
              "no cache", "static cache (in place)", "concat cache (torch.cat)", *speculative.MEANING.values(),
              *blocks.EVENT_WORDS.values(), "memory-bound", "compute-bound", "free", "shared", "used",
              "block state\x04cached", "k (new)", "v (new)", "weights @ V", "attention output", "FFN output"]
             + ["start", "prefill", "hit", "fork", "decode", "cow", "finish", "end", "block event\x04full"]
             + [*timeline.POLICY_WORDS.values(), "count row\x04without"])
    assert [w for w in words if w not in ZH] == []


def test_no_widget_function_shadows_t():
    """A loop variable named t inside a function that calls t() would call a number: none may exist."""
    scopes = (ast.FunctionDef, ast.Lambda, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)

    def own(node):
        for child in ast.iter_child_nodes(node):
            yield child
            if not isinstance(child, scopes):
                yield from own(child)

    def binds_t(node):
        args = getattr(node, "args", None)
        names = [a.arg for a in (args.args + args.kwonlyargs + args.posonlyargs)] if isinstance(args, ast.arguments) else []
        return "t" in names or any(isinstance(n, ast.Name) and n.id == "t" and isinstance(n.ctx, ast.Store)
                                   for n in own(node))

    def calls_t(node):
        for n in own(node):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "t":
                return True
            if isinstance(n, scopes) and not binds_t(n) and calls_t(n):
                return True
        return False

    bad = [f"{p.name}:{n.lineno}" for p in sorted(WIDGETS.glob("*.py"))
           for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if isinstance(n, scopes) and binds_t(n)
           and calls_t(n)]
    assert bad == []


def test_the_font_has_every_chinese_character_of_the_table():
    from fontTools.ttLib import TTFont

    cmap = TTFont(str(FONT_PATH)).getBestCmap()
    missing = sorted({c for zh in ZH.values() for c in zh if CJK.match(c) and ord(c) not in cmap})
    assert missing == [], f"rebuild the font subset (python -m tools.fonts --rebuild): {''.join(missing)}"


# -- t and set_language -------------------------------------------------------------------------------------

def test_set_language_refuses_what_it_does_not_have():
    with pytest.raises(ValueError, match=r"lang must be one of \('en', 'zh'\) \(English, Chinese\), got 'fr'"):
        i18n.set_language("fr")
    with pytest.raises(ValueError, match=r"got 'ZH'"):
        lib.notebook.setup(lang="ZH", verbose=False)
    assert i18n.language() == "en"


def test_t_formats_after_translating_and_switches_back():
    assert t("step {step}", step=3) == "step 3"
    i18n.set_language("zh")
    try:
        assert t("step {step}", step=3) == "第 3 步"
        assert t("no entry for {x}", x=1) == "no entry for 1"  # untranslated: English
        assert t("block state\x04cached") == "仍在前缀缓存中"
    finally:
        i18n.set_language("en")
    assert t("step {step}", step=3) == "step 3" and t("block state\x04cached") == "cached"
    assert t("text with {braces} kept") == "text with {braces} kept"  # no fields: not formatted
    assert t("{text}", text="a") == "a"  # a field may be called text


# -- figures under zh -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pair(chat):
    from lib.widgets.player import generate_pair
    model, tok = chat
    return generate_pair(model, tok, "<s>人", max_new_tokens=4)


def test_player_figures_speak_chinese(zh, chat, pair):
    from lib.widgets import player as P
    _, tok = chat
    for make in (lambda: P.plot_step(pair[0], tok, 2, pair[1]), lambda: P.plot_strip(pair[1], tok, pair[0])):
        assert_chinese(figure_texts(drawn_without_missing_glyphs(make)), "player figure")
    fig = P.player_figure(pair[0], tok, pair[1])
    texts = ([a.text for a in fig.layout.annotations] + [b.label for b in fig.layout.updatemenus[0].buttons]
             + [fig.layout.title.text, fig.layout.sliders[0].currentvalue.prefix] + list(fig.frames[1].data[3].y)
             + [fr.layout.title.text for fr in fig.frames] + list(fig.frames[2].data[1].hovertext))
    assert_chinese(texts, "player plotly figure")
    assert_chinese([P.frame_html(P.player_frames(pair[0], tok, pair[1])[2])], "player HTML")
    assert_chinese([P.player_table(pair[0], tok, pair[1])], "player table")


def test_player_widget_controls_and_messages_speak_chinese(zh, chat):
    from lib.widgets.player import GenerationPlayer
    model, tok = chat
    p = GenerationPlayer(model, tok, prompt="<s>人", max_new_tokens=3)
    descriptions = [c.description for c in (p.prompt_box, p.temperature, p.seed, p.use_cache, p.max_new, p.slider,
                                            p.back_button, p.step_button)]
    assert_chinese(descriptions + [l for l in p.top_k.options[0][:1]], "player controls")
    assert_chinese([p.view.value], "player view")
    p.set_prompt("<s>人é")
    assert p.message.startswith("提示词中有 1 个字符不在模型的词表中：'é' (U+00E9)")
    assert_chinese([p.message, p.view.value], "player error")


def test_attention_speaks_chinese(zh, chat):
    from lib.generate import generate
    from lib.widgets import attention as A
    model, tok = chat
    trace = generate(model, tok.encode("<s>人工"), 3, trace=True).trace
    for make in (lambda: A.plot_attention(trace, tok), lambda: A.plot_attention_heads(trace, tok)):
        assert_chinese(figure_texts(drawn_without_missing_glyphs(make)), "attention figure")
    fig = A.attention_figure(trace, tok)
    assert_chinese([fig.layout.title.text, fig.data[0].hovertemplate, fig.layout.coloraxis.colorbar.title.text]
                   + [b.label for b in fig.layout.updatemenus[0].buttons], "attention plotly figure")
    ex = A.AttentionExplorer(model, tok, prompt="<s>人", max_new_tokens=3)
    assert_chinese([ex.prompt.description, ex.layer.description, ex.head.description, ex.step.description,
                    ex.message.value, ex.drawn["title"], ex.head.options[-1][0]], "attention explorer")
    ex.set(prompt="<s>é")
    assert ex.error.startswith("有 1 个字符不在词表中：'é'") and CJK.search(ex.message.value)


def test_sampling_speaks_chinese(zh, chat):
    from lib.widgets import sampling as S
    model, tok = chat
    logits = S.next_token_logits(model, tok, "<s>")
    fig = drawn_without_missing_glyphs(lambda: S.plot_sampling(logits, tok, temperature=0.7, top_k=5))
    assert_chinese(figure_texts(fig), "sampling figure")
    pf = S.sampling_figure(logits, tok)
    assert_chinese([pf.layout.title.text, pf.layout.yaxis.title.text, pf.data[0].hovertemplate,
                    pf.layout.sliders[0].currentvalue.prefix], "sampling plotly figure")
    ex = S.SamplingExplorer(model, tok)
    ex.sample(5, seed=1)
    assert_chinese([ex.prompt_box.description, ex.temperature.description, ex.top_k.description,
                    ex.draw_button.description, ex.bars_box.value, ex.message_box.value, ex.samples_box.value],
                   "sampling explorer")
    ex.set(prompt="<s>é")
    assert "不在这个模型的词表中：'é'" in ex.message and "仍显示 '<s>'" in ex.message


def test_cost_curves_speak_chinese(zh):
    from lib.widgets import cost_curves as C
    assert_chinese(figure_texts(drawn_without_missing_glyphs(lambda: C.plot_kv_counts(8))), "K/V counts")
    assert_chinese(figure_texts(drawn_without_missing_glyphs(lambda: C.plot_cost_curves("chat", 32, loglog=True))),
                   "cost curves")
    fig = C.plotly_cost_curves("chat", 32)
    assert_chinese([d.name for d in fig.data] + [fig.layout.title.text, fig.layout.yaxis.title.text]
                   + [b.label for m in fig.layout.updatemenus for b in m.buttons], "cost curves plotly")
    ex = C.CostCurvesExplorer(n=16, loglog=True)
    assert_chinese([ex.model.description, ex.show.description, ex.loglog.description, ex.text.value, *ex.drawn["labels"].values(),
                    *(label for label, _ in ex.show.options), *(label for label, _ in ex.model.options[:2])],
                   "cost curves explorer")
    assert set(ex.drawn["traces"]) >= {"K/V, with cache", "KV cache bytes"}  # the keys stay English


def test_memory_speaks_chinese(zh):
    from lib.widgets import memory as M
    for make in (M.plot_kv_per_token, M.plot_memory):
        assert_chinese(figure_texts(drawn_without_missing_glyphs(make)), "memory figure")
    fig = M.memory_figure()
    assert_chinese([d.name for d in fig.data] + [fig.layout.title.text, fig.layout.xaxis.title.text],
                   "memory plotly figure")
    ex = M.MemoryExplorer()
    assert_chinese([ex.model_box.description, ex.dtype_box.description, ex.kv_dtype_box.description,
                    ex.context_box.description, ex.batch_box.description, ex.view.value], "memory explorer")
    from lib.presets import PRESETS
    yours = M.MemoryExplorer(model=PRESETS["mistral-7b"].replace(n_layers=3))  # a model of the learner's own
    assert "你的模型" in yours.view.value and "your model" not in yours.view.value


def test_roofline_speaks_chinese(zh):
    from lib.widgets import roofline as R
    for make in (lambda: R.plot_roofline(R.roofline_points()), R.plot_operator_roofline, R.plot_bytes_split):
        assert_chinese(figure_texts(drawn_without_missing_glyphs(make)), "roofline figure")
    fig = R.plotly_batch_roofline()
    assert_chinese([d.name for d in fig.data] + [fig.layout.title.text, fig.layout.xaxis.title.text]
                   + list(fig.data[0].hovertext), "roofline plotly figure")
    ex = R.RooflineExplorer()
    assert_chinese([c.description for k, c in ex.controls.items() if k != "dtype"] + [ex.summary_box.value]
                   + [d.name for d in ex.figure.data], "roofline explorer")
    import dataclasses
    from lib.roofline import DEFAULT_GPU
    mine = dataclasses.replace(DEFAULT_GPU, name="this machine (cpu)")  # as measure_machine names what it measured
    fig = drawn_without_missing_glyphs(lambda: R.plot_roofline(R.roofline_points(("tiny",), "fp32"), mine))
    assert any(x.startswith("本机（cpu）") for x in figure_texts(fig))  # the title names it in Chinese
    ex = R.RooflineExplorer(machines=[mine])
    assert ("本机（cpu）", "this machine (cpu)") in ex.controls["machine"].options  # shown in Chinese, keyed as named


def test_block_pool_speaks_chinese(zh, chat):
    from lib.widgets import blocks as B
    frames = B.record_story(*chat)
    said = model_words(*(s for f in frames for s in f.texts.values()))
    assert_chinese([f.caption for f in frames], "block pool captions", said)
    assert_chinese(figure_texts(drawn_without_missing_glyphs(lambda: B.plot_story(frames))), "block pool figure", said)
    fig = B.story_figure(frames)
    assert_chinese([fig.layout.title.text, fig.layout.sliders[0].currentvalue.prefix]
                   + [h for row in fig.data[0].hovertext for h in row if h], "block pool plotly", said)
    assert "仍在前缀缓存中" in "".join(B.frame_html(f) for f in frames)  # a block freed but still indexed
    w = B.BlockPoolWidget(*chat)
    assert_chinese([c.description for k, c in w.controls.items() if not k.startswith("prompt")]
                   + [w.back_button.description, w.step_button.description, w.slider.description], "block widget")


def test_speculative_decoding_speaks_chinese(zh, target_and_draft):
    from lib.speculative import measure_acceptance, speculative_generate
    from lib.widgets import speculative as S
    target, draft, tok = target_and_draft
    result = speculative_generate(target, draft, tok.encode("<s>the"), 8, k=3, eos_id=tok.eos_id)
    said = model_words(tok.decode(result.sequences[0]))
    assert_chinese(figure_texts(drawn_without_missing_glyphs(lambda: S.plot_rounds(result, tok))), "rounds", said)
    rows = measure_acceptance(target, draft, [tok.encode("<s>the")], ks=(1, 2), max_new_tokens=8, eos_id=tok.eos_id)
    assert_chinese(figure_texts(drawn_without_missing_glyphs(lambda: S.plot_tokens_per_pass(rows))), "per pass")
    fig = S.rounds_figure(result, tok)
    assert_chinese([fig.layout.title.text] + [d.name for d in fig.data[1:]] + list(fig.data[0].hovertext),
                   "rounds plotly", said)
    assert_chinese([S.rounds_html(result, tok)], "rounds HTML", said)
    ex = S.SpeculativeExplorer(target, draft, tok)
    assert_chinese([ex.prompt_box.description, ex.k_slider.description, ex.seed.description], "speculative explorer")


def test_worked_example_speaks_chinese(zh, chat):
    from lib.widgets import worked as W
    case = W.run_worked_case(*chat, "<s>人", max_new_tokens=2)
    fig = W.worked_figure(case)
    assert_chinese([fig.layout.title.text] + [h for d in fig.data for h in d.header.values]
                   + list(fig.data[0].cells.values[0]), "worked plotly figure")
    ex = W.WorkedExplorer(*chat, "<s>人", max_new_tokens=2)
    assert CJK.search(ex.status.value) and CJK.search(ex.prompt_box.description)
    ex.set_prompt("<s>é")
    assert ex.error.startswith("有 1 个字符不在词表中")


def test_english_comes_back_in_the_same_process(chat, pair):
    from lib.widgets import player as P
    _, tok = chat
    i18n.set_language("zh")
    try:
        zh_title = P.plot_step(pair[0], tok, 2, pair[1]).axes[0].get_title(loc="left")
    finally:
        i18n.set_language("en")
    en_title = P.plot_step(pair[0], tok, 2, pair[1]).axes[0].get_title(loc="left")
    assert zh_title.startswith("第 2 步（解码）") and en_title.startswith("step 2 (decode): fed")


def test_speaking_sets_the_language_for_a_block_and_restores_it_even_after_an_error():
    from lib import i18n
    assert i18n.language() == "en"
    with i18n.speaking("zh"):
        assert i18n.language() == "zh"
    with pytest.raises(RuntimeError):
        with i18n.speaking("zh"):
            raise RuntimeError("boom")
    assert i18n.language() == "en"


# -- full-width punctuation where a widget glues a Chinese label to its value (i18n.colon / i18n.parens) -----------

HALF_WIDTH_NEXT_TO_CHINESE = re.compile(r"[\u4e00-\u9fff][:(]|\)[\u4e00-\u9fff]|[\u4e00-\u9fff] \(")


def half_width_slips(html_text: str) -> list[str]:
    """Each ": ", "(" or ")" set against a Chinese character in the text of ``html_text`` (tags and attribute values
    stripped of their quotes), with a few characters around it."""
    text = re.sub(r"<[^>]*>", " ", html_text.replace('title="', ' ').replace('"', ' '))
    return [text[max(m.start() - 8, 0):m.end() + 8] for m in HALF_WIDTH_NEXT_TO_CHINESE.finditer(text)]


def test_colon_and_parens_follow_the_language():
    assert (i18n.colon(), i18n.parens("x")) == (": ", " (x)")
    with i18n.speaking("zh"):
        assert (i18n.colon(), i18n.parens("位置 1..3")) == ("：", "（位置 1..3）")


def test_widgets_join_chinese_labels_with_full_width_punctuation():
    from lib.corpus import heldout_text
    from lib.lm import windows
    from lib.widgets import capacity as cw, ring, tiles

    model, tok = lib.load_demo("lm")
    ids = windows(tok, heldout_text("en"), model.config.max_seq_len, 4)[1:2, :32]
    q, k, v, mix = tiles.layer_qkv(model, ids, 1)
    tile = tiles.tile_frames(q, k, v, head=2, block_size=8, row=20)
    chunk = tiles.split_k_frames(q, k, v, mix, head=1, chunk_size=8)
    rings = ring.ring_frames(model, tok, ids[0, :12], window=8, sinks=1)
    cap = cw.sweep("llama-3-8b", "H100 SXM")[0]
    with i18n.speaking("zh"):
        shown = {"ring": ring.ring_html(rings[10]) + ring._ppl_line(rings[10]),
                 "tiles": tiles.tile_html(tile[9], 32) + tiles.chunk_html(chunk[-1]),
                 "capacity": cw.capacity_html(cap) + "".join(b.hovertext[0] for b in cw._bar_traces(cap))}
        assert "累计困惑度（位置 1..10）" in re.sub(r"<[^>]*>", "", shown["ring"])
        assert "累计困惑度：" in shown["ring"] and "到目前为止的合并输出：" in shown["tiles"]
    slips = {name: half_width_slips(h) for name, h in shown.items()}
    assert not any(slips.values()), f"half-width punctuation against Chinese text: {slips}"


# Control labels the Chinese edition keeps as written: names from code and the literature (a sampling parameter, a
# dtype, vLLM's engine arguments, a GPU, the block-pool widget's request names), which a learner types elsewhere.
KEPT_AS_WRITTEN = {"top-k", "top-p", "n", "dtype", "GPU", "gpu_memory_utilization", "max_model_len", "A", "B", "C"}


def test_every_live_widget_of_the_course_works_in_chinese_control_by_control(zh):
    """Every live widget, built in Chinese as its notebook builds it (tools.bench_widgets.cases), takes every one
    of its controls changed twice the way the page changes it; each control's label is Chinese or a name kept as
    written, and what the widget shows has Chinese in it. The browser test drives the Chinese 05 in JupyterLab;
    this drives all of them (the kernel's side of each change) without a browser."""
    import ipywidgets as W

    from tools import bench_widgets as B
    cjk = re.compile(r"[\u4e00-\u9fff]")
    for name, make in B.cases().items():
        live = make()
        rows = B.measure(name, live, repeat=2)
        assert rows, f"{name}: no control was changed"
        labels = [getattr(w, "description", "") for w in B.controls(live.widget)]
        english = [x for x in labels if x and not cjk.search(x) and x not in KEPT_AS_WRITTEN]
        assert not english, f"{name}: control labels not in Chinese: {english}"
        shown, todo = [], [live.widget]
        while todo:
            w = todo.pop()
            if isinstance(w, W.Box):
                todo += list(w.children)
            elif isinstance(w, (W.HTML, W.Label, W.HTMLMath)):
                shown.append(w.value)
            elif isinstance(w, W.Output):
                shown += [str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in w.outputs]
        assert any(cjk.search(s) for s in shown + labels), f"{name}: nothing it shows is in Chinese"


def test_the_errors_a_notebook_asks_the_learner_to_read_speak_its_language(chat):
    """02's context-window errors and 09's exhausted pool: the same exception types, the English text as tests
    and programmers know it, the Chinese one under zh (issue 39)."""
    import torch
    from lib.blocks import PoolExhaustedError
    from lib.paged import PagedKVPool

    model, tok = chat
    long_prompt = tok.encode("<s>" + "人工智能" * 15)

    def errors():
        out = []
        with pytest.raises(ValueError) as e:
            lib.generate(model, long_prompt, 10)
        out.append(str(e.value))
        with pytest.raises(ValueError) as e:
            model(torch.tensor([tok.encode("<s>" + "人" * 64)]))
        out.append(str(e.value))
        pool = PagedKVPool.for_model(model, n_blocks=3, block_size=4)
        request = pool.cache([pool.new_table("req-1")])
        model(torch.tensor([tok.encode("<s>attention")]), cache=request)
        with pytest.raises(PoolExhaustedError) as e:
            model(torch.tensor([tok.encode(" is all")]), cache=request)
        out.append(str(e.value))
        return out

    english = errors()
    assert english[0].startswith("a prompt of 61 tokens leaves room for at most 4 new token(s)")
    assert english[1] == ("sequence too long for the context window: positions 0..64 were asked for, but this model "
                          "has max_seq_len=64 (positions 0..63)")
    assert english[2].startswith("KV block pool exhausted: appending 7 token(s) to 1 sequence(s) needs 2 free block(s)")
    with i18n.speaking("zh"):
        chinese = errors()
    assert chinese[0] == "61 个 token 的提示词在上下文窗口（max_seq_len=64）里最多只留得下 4 个新 token，但 max_new_tokens=10"
    assert chinese[1].startswith("序列超出了上下文窗口：要用到位置 0..64")
    assert chinese[2].startswith("KV 块池已用尽：向 1 个序列追加 7 个 token，需要 2 个空闲块") and "n_blocks >= 5" in chinese[2]
    assert errors() == english  # and back
