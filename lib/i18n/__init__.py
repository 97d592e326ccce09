"""The words lib prints and draws, in the notebook's language: ``lib.notebook.setup(lang="zh")`` switches them to
Chinese. This package stands on the ground floor and imports nothing from lib: the engine (``Trace.table``), the
text tables, the vLLM map, the exercises and the widgets all speak through it. Error messages raised by lib's API
stay in English (they are for the programmer); what a widget or table shows a learner — titles, axis labels,
legends, buttons, tooltips, its messages — goes through ``t``; a text a notebook cell wrote and hands to lib
(already formatted, so ``t`` cannot look it up) goes through ``say``, called where the text is shown.

    from lib.i18n import t
    ax.set_title(t("K/V computed per step"))
    t("step {step} of {n}", step=3, n=5)   # formatted after translation

``ZH`` maps an English text (as the widget writes it) to its Chinese text; a text with no entry is shown in
English. Terms follow the course glossary (``notebooks/zh/GLOSSARY.md``). Where one English word needs two
Chinese ones, the key carries a context before ``CONTEXT`` (gettext's separator): ``t("block state\x04cached")``
is "cached" in English and 仍在前缀缓存中 in Chinese, while ``t("cached")`` (a count with the cache) is 有缓存.
Every text a widget passes to ``t`` has an entry (``tests/test_i18n.py`` reads them from the source). The
Chinese of lib's text outputs and of the lines a notebook prints is in ``lib.i18n.outputs`` (merged into ``ZH``).
"""
from __future__ import annotations

from contextlib import contextmanager

from .outputs import ZH_OUTPUTS, translate_printed

LANGUAGES = ("en", "zh")  # English first; tools.edition builds one notebook edition per language
_current = "en"

CONTEXT = "\x04"  # separates a key's context from its English text

ZH: dict[str, str] = {
    "{dtype} (KV cache in {kv_dtype})": "{dtype}（KV 缓存为 {kv_dtype}）",
    # -- shared: prompts and messages (lib/widgets/__init__.py) --
    "{what}; still showing {kept}.": "{what}；仍显示 {kept}。",
    "{n} character(s) not in the vocabulary: {chars}. The vocabulary has {size} tokens: printable ASCII, the "
    "Chinese characters and punctuation of the training corpus (such as 人工智能深度学习), and <s>, <eos>, <pad>, <unk>.":
        "有 {n} 个字符不在词表中：{chars}。词表共 {size} 个 token：可打印 ASCII 字符、训练语料中的汉字和标点"
        "（如 人工智能深度学习），以及 <s>、<eos>、<pad>、<unk>。",
    "not in this model's vocabulary: {chars}. It knows printable ASCII, <s>, <eos> and the corpus's Chinese "
    "characters (such as 人工智能深度学习)":
        "不在这个模型的词表中：{chars}。它认识可打印 ASCII 字符、<s>、<eos> 和语料中的汉字（如 人工智能深度学习）",
    # -- controls shared by several widgets --
    "prompt": "提示词", "layer": "层", "head": "头", "step": "步", "step ": "步 ", "all": "全部",
    "temperature": "温度", "temperature: ": "温度：", "seed": "随机种子", "model": "模型", "show": "显示",
    "▶ Live widget ({name}): run this cell to use it (a saved notebook keeps no widget).":
        "▶ 交互控件（{name}）：运行这个单元格即可使用（保存的笔记本里不存控件）。",
    "◀ Back": "◀ 后退", "Step ▶": "前进 ▶", "▶ Play": "▶ 播放", "❚❚ Pause": "❚❚ 暂停", "play": "播放",
    "event": "事件", "event ": "事件 ", "batch": "批次", "batch: ": "批次：", "machine": "硬件", "context": "上下文",
    "requests": "请求数", "weights": "权重", "KV cache": "KV 缓存", "max new tokens": "最多生成 token 数",
    "top-k (0=off)": "top-k（0=关）", "top-p (1=off)": "top-p（1=关）",
    "off": "关", "0 (greedy)": "0（贪心）", "draw 20 tokens": "采样 20 个 token", "k (draft)": "k（草稿）",
    "samples of A": "A 的样本数", "block size": "块大小", "pool blocks": "池中块数", "round: ": "轮次：",
    "concurrent requests: ": "并发请求数：",
    # -- phases and states --
    "prefill": "预填充", "decode": "解码", "recompute": "重计算", "prompt token": "提示词 token",
    "generated token": "已生成 token", "newest token": "最新 token", "generated": "已生成", "newest": "最新",
    "computed (first time)": "首次计算", "computed again (wasted)": "重复计算（浪费）",
    "read from the cache": "从缓存读取", "none yet (newest)": "尚无（最新 token）",
    "K/V computed for the first time in this step": "本步首次计算的 K/V",
    "K/V computed again although an earlier step already had them (no cache: waste)":
        "前面的步骤已经算过、这里又重算的 K/V（无缓存：浪费）",
    "K/V read from the cache, not computed": "从缓存读取的 K/V，没有重新计算",
    "no K/V yet: the newest token is fed in the next step": "尚无 K/V：最新 token 要到下一步才输入",
    "memory-bound": "访存受限", "compute-bound": "计算受限",
    # -- the generation player --
    "position {p}": "位置 {p}", "positions {a}..{b}": "位置 {a}..{b}",
    "step {i} ({phase}): fed {fed} at {pos} → chose {chosen} (p={p})":
        "第 {i} 步（{phase}）：在{pos} 输入 {fed} → 选出 {chosen}（p={p}）",
    "phase": "阶段", "sequence (newest last)": "序列（最新在末尾）", "top-{k} candidates (p)": "top-{k} 候选（p）",
    "chosen": "选中", "K/V so far: cache / no cache": "累计 K/V：有缓存 / 无缓存", "* chosen": "* 选中",
    "counts per layer (layer {layer} of {n}); the {which} count comes from {src}":
        "计数按每层计（共 {n} 层，显示第 {layer} 层）；{which}的计数来自 {src}",
    "a second Trace": "第二个 Trace", "uncached": "无缓存", "cached": "有缓存", "position": "位置",
    "tokens": "token", "token": "token", "probability (sampling distribution)": "概率（采样分布）",
    "top-{k} next tokens": "概率最高的 {k} 个候选 token", "with cache": "有缓存", "count row\x04without": "无缓存",
    "without cache": "无缓存", "with KV cache": "使用 KV 缓存",
    "K/V vectors computed so far (per layer)": "累计计算的 K/V 向量（每层）",
    "running count after step {step}\n(steps 0–{last}: {n} in all)": "第 {step} 步后的累计数\n（第 0–{last} 步，共 {n} 步）",
    "p={p}   K/V so far {a} / {b}": "p={p}   累计 K/V {a} / {b}",
    "step {step}": "第 {step} 步",
    "{mode}: each row is one forward pass; right: K/V computed so far, cache / no cache (per layer)":
        "{mode}：每行是一次前向传播；右侧：累计计算的 K/V，有缓存 / 无缓存（每层）",
    "position {p}: {text} ({kind})": "位置 {p}：{text}（{kind}）", "position {p}: {what}": "位置 {p}：{what}",
    "position {p}: {kind}": "位置 {p}：{kind}",
    " ← chosen": " ← 选中", "  ← chosen": "  ← 选中", "← chosen": "← 选中",
    "top-{k} next tokens (sampling distribution)": "概率最高的 {k} 个候选 token（采样分布）",
    "K/V computed so far (per layer)": "累计计算的 K/V（每层）",
    "tokens (grey: prompt, white: generated, yellow with a heavy edge: newest) and their K/V:":
        "token（灰：提示词，白：已生成，黄色粗边：最新）及其 K/V：",
    "<b>top candidates</b> (sampling distribution)": "<b>候选 token</b>（采样分布）",
    "<b>K/V computed so far</b> (layer {layer}, per layer; this step: {computed} computed, {read} read)":
        "<b>累计计算的 K/V</b>（第 {layer} 层，按每层计；本步：计算 {computed} 个，读取 {read} 个）",
    "the {which} count comes from {src}": "{which}的计数来自 {src}",
    "the run without the cache chose different tokens; its count comes from lib.costs":
        "无缓存的那次运行选出了不同的 token；它的计数改由 lib.costs 给出",
    "The prompt has {n} character(s) that are not in the model's vocabulary: {shown}. Allowed: printable ASCII, "
    "the Chinese characters of the training corpus (tokenizer.chars) and the special tokens <s>, <eos>, <pad>, "
    "<unk>. Remove or replace them, e.g. try <s>人 or <s>深.":
        "提示词中有 {n} 个字符不在模型的词表中：{shown}。允许的字符：可打印 ASCII、训练语料中的汉字（tokenizer.chars），"
        "以及特殊 token <s>、<eos>、<pad>、<unk>。请删除或替换它们，例如试试 <s>人 或 <s>深。",
    "Cannot generate from this prompt: {err}": "无法从这个提示词生成：{err}",
    " Did you mean {text}?": "你是不是想输入 {text}？",
    "open: its KV cache does not fit": "空心：KV 缓存放不下",
    "{problem} The heat-map still shows the last prompt that worked, {kept}.":
        "{problem} 热力图仍显示上一个能用的提示词 {kept}。",
    " (<s> added in front: every text the model learnt from starts with it)":
        "（已在前面补上 <s>：模型学过的每段文本都以它开头）",
    "The player draws at most {m} positions after <s>: this prompt has {n} tokens, so 'max new tokens' can be at "
    "most {k} (it is {v}). Lower it or shorten the prompt.":
        "播放器最多画出 <s> 之后的 {m} 个位置：这个提示词有 {n} 个 token，所以“最多生成 token 数”最多只能是 {k}"
        "（现在是 {v}）。请调低它，或缩短提示词。",
    # -- the attention heat-map --
    "step {step}: query {query} (pos {qpos}) -> key {key} (pos {kpos}): weight {weight}":
        "第 {step} 步：查询 {query}（位置 {qpos}）-> 键 {key}（位置 {kpos}）：权重 {weight}",
    "layer {layer}, head {head}: step {step}'s query {query} over {n} cached keys\n(bright: this step's row; "
    "outlined: the K/V it appended)":
        "第 {layer} 层，第 {head} 头：第 {step} 步的查询“{query}”关注 {n} 个缓存的键\n（亮：本步的行；描边：本步追加的 K/V）",
    "all heads, step {step}: query {query} over {n} keys (outlined: the K/V it appended)":
        "所有头，第 {step} 步：查询“{query}”关注 {n} 个键（描边：本步追加的 K/V）",
    "step {step}: query {query} reads {n} cached key(s); outlined = the K/V it appended":
        "第 {step} 步：查询“{query}”读取 {n} 个缓存的键；描边 = 本步追加的 K/V",
    "prefill: {n} prompt key(s), one pass": "预填充：提示词的 {n} 个键，一次前向传播",
    "decode: one key appended per step": "解码：每步追加一个键",
    "{name} of layer {layer}": "第 {layer} 层的 {name}",
    "each (B, n_kv_heads, T, head_dim) = {shape}: {filled} of {T} positions written; one position is {bytes:,} "
    "bytes in all {L} layers ({dtype})":
        "各为 (B, n_kv_heads, T, head_dim) = {shape}：{T} 个位置中已写入 {filled} 个；一个位置在全部 {L} 层中占 "
        "{bytes:,} 字节（{dtype}）",
    "not in the cache yet": "尚未进入缓存", "key position in the cache (its token)": "键在缓存中的位置（及其 token）",
    "step: newest query": "步：最新的查询", "attention weight": "注意力权重", "step {s}: {query}": "第 {s} 步：{query}",
    "generated <b>{text}</b> in {n} steps": "用 {n} 步生成了 <b>{text}</b>",
    "layer {layer}, all heads": "第 {layer} 层，所有头", "layer {layer}, head {head}": "第 {layer} 层，第 {head} 头",
    "attention heat-map: {title}": "注意力热力图：{title}", "newest key": "最新的键", "head {h}": "第 {h} 头",
    "layer {l}": "第 {l} 层", "cached key": "缓存的键", "the prompt has {n} tokens; the model's context window holds {limit}":
        "提示词有 {n} 个 token；模型的上下文窗口只能容纳 {limit} 个",
    "query at %{y}<br>key at position %{x}<br>weight %{z:.4f}": "查询：%{y}<br>键的位置：%{x}<br>权重 %{z:.4f}",
    "weight": "权重",
    # -- the block pool --
    "{used} used, {shared} shared, {free} free; thick outline: touched by this event; dashed: free":
        "已用 {used}，共享 {shared}，空闲 {free}；粗边框：本事件涉及的块；虚线：空闲",
    "an empty pool: {n} blocks of {size} token slots, all on the free list":
        "空的块池：{n} 个块，每块 {size} 个 token 槽位，全部在空闲链表上",
    "block {block}: {state}, reference count {refs}<br>owners: {owners}<br>tokens: {tokens}":
        "块 {block}：{state}，引用计数 {refs}<br>持有者：{owners}<br>token：{tokens}",
    "; {hits} full block(s) found in the prefix cache, only the rest computed":
        "；前缀缓存中命中 {hits} 个满块，只计算其余部分",
    "{name} arrives: prompt {text} ({n} tokens) takes {blocks} block(s){reused}; its first token is {first}":
        "{name} 到达：提示词 {text}（{n} 个 token）占用 {blocks} 个块{reused}；它的第一个 token 是 {first}",
    "{name} forks into {n} samples ({children}): they share its {shared} block(s), reference count {n}; nothing "
    "is copied": "{name} 分叉为 {n} 个样本（{children}）：共享它的 {shared} 个块，引用计数为 {n}；没有复制任何数据",
    "{n} block(s) {what}": "{n} 个块{what}",
    "every request is done: all {n} blocks are free again ({copies} copy-on-write copies, {hits} block(s) reused "
    "from the prefix cache)": "所有请求都已完成：{n} 个块全部重新空闲（写时复制 {copies} 次，前缀缓存复用 {hits} 个块）",
    "{i}. {kind}: {used} used, {shared} shared, {free} free": "{i}. {kind}：已用 {used}，共享 {shared}，空闲 {free}",
    "sequence": "序列", "block table": "块表", "text": "文本",
    "{name} is done; its {n} block(s) lose a reference (a block nobody else holds returns to the free list)":
        "{name} 已完成；它的 {n} 个块各少一个引用（没有其他持有者的块回到空闲链表）",
    "free": "空闲", "free, still in the prefix cache": "空闲，但仍在前缀缓存中", "shared (refcount > 1)": "共享（引用计数 > 1）",
    "touched by the event": "本事件涉及的块", "held by {name}": "由 {name} 持有",
    "{used} used, {shared} shared, {free} free": "已用 {used}，共享 {shared}，空闲 {free}",
    "decode step: {names} each add one token": "解码步：{names} 各追加一个 token",
    "decode step: {names} adds one token": "解码步：{names} 追加一个 token",
    "; every write fits in a last block": "；每次写入都放得进最后一个块",
    "block {block}: {state}, reference count {refs}": "块 {block}：{state}，引用计数 {refs}",
    "allocated": "被分配", "shared": "共享", "copied on write": "被写时复制", "freed": "被释放",
    "prefix-cache hit": "命中前缀缓存", "evicted from the prefix index": "被移出前缀索引",
    "start": "开始", "hit": "前缀命中", "fork": "分叉", "cow": "写时复制", "finish": "完成", "end": "结束",
    "block event\x04full": "池满", "used": "已用", "block state\x04cached": "仍在前缀缓存中",
    # -- cost curves --
    "{what}, with cache": "{what}，有缓存", "{what}, without cache": "{what}，无缓存",
    "CPU time": "CPU 时间", "wall time": "墙钟时间", "{label} (slope {slope})": "{label}（斜率 {slope}）",
    "context length t (keys attended in the step)": "上下文长度 t（本步关注的键数）",
    "K/V computed in the step": "本步计算的 K/V", "per step: t without a cache, 1 with it": "每步：无缓存为 t，有缓存为 1",
    "context length t": "上下文长度 t", "K/V computed so far": "累计计算的 K/V",
    "cumulative after {n} steps: O(n²) vs O(n)": "{n} 步后的累计值：O(n²) 对 O(n)",
    "cumulative FLOPs": "累计 FLOPs", "FLOPs per step": "每步 FLOPs", "context length t (tokens)": "上下文长度 t（token）",
    "cumulative ms": "累计毫秒", "ms per step": "每步毫秒",
    "measured: {layers} layers, d_model {d}; log-log slopes over the last half":
        "实测：{layers} 层，d_model {d}；双对数坐标下的斜率取自后半段",
    "tokens per sequence": "每个序列的 token 数", "bytes ({dtype})": "字节（{dtype}）",
    "{name}: KV cache memory = weight memory\nat {n} tokens per sequence": "{name}：每个序列 {n} 个 token 时\nKV 缓存显存 = 权重显存",
    "{name}: at {n} tokens per sequence the KV cache\nis {share} of the weights' memory":
        "{name}：每个序列 {n} 个 token 时\nKV 缓存显存是权重显存的 {share}",
    "K/V computations, cumulative": "K/V 计算量，累计",
    "{name}: generating {n} tokens with and without a KV cache (slopes: log-log fit over the last half)":
        "{name}：有无 KV 缓存时生成 {n} 个 token（斜率：后半段在双对数坐标下拟合）",
    "{model}, n = {n}: K/V computed {kv_c} with cache vs {kv_n} without ({kv_x}x); FLOPs {f_c} vs {f_n} ({f_x}x); "
    "KV cache {kv_bytes} vs weights in memory {w_bytes}":
        "{model}，n = {n}：计算的 K/V 有缓存 {kv_c} 个，无缓存 {kv_n} 个（{kv_x} 倍）；FLOPs {f_c} 对 {f_n}（{f_x} 倍）；"
        "KV 缓存 {kv_bytes}，显存中的权重 {w_bytes}",
    "KV cache, batch {batch}: {size} at {n} tokens": "KV 缓存，批次 {batch}：{n} 个 token 时 {size}",
    "weights in memory: {size}": "显存中的权重：{size}", "K/V computed (per layer)": "计算的 K/V（每层）",
    "FLOPs (solid: proj. + FFN, dashed: attention)": "FLOPs（实线：投影 + FFN，虚线：注意力）",
    "memory, bytes ({dtype})": "显存，字节（{dtype}）", "KV cache bytes": "KV 缓存字节数", "weights in memory": "显存中的权重",
    "{which}: {n} in total": "{which}：共 {n} 个", " (log-log, slopes fitted over the last half)": "（双对数坐标，斜率由后半段拟合）",
    "measured: {layers} layers, d_model {d} (slopes: log-log fit over the last half)":
        "实测：{layers} 层，d_model {d}（斜率：后半段在双对数坐标下拟合）",
    "chat (demo model, d_model 64)": "chat（演示模型，d_model 64）",
    "lm (real small language model, d_model 256)": "lm（真实的小语言模型，d_model 256）",
    "larger (random weights, d_model 256)": "larger（更大的随机权重模型，d_model 256）",
    "projections + FFN": "投影 + FFN", "attention": "注意力", "both": "两者", "per step": "每步", "cumulative": "累计",
    "no cache": "无缓存", "static cache (in place)": "静态缓存（原地写入）", "concat cache (torch.cat)": "拼接缓存（torch.cat）",
    "linear": "线性坐标", "log-log": "双对数坐标",
    # -- memory --
    "KV cache per token, KiB ({dtype})": "每个 token 的 KV 缓存，KiB（{dtype}）",
    "context length per request (tokens)": "每个请求的上下文长度（token）", "GiB (log scale)": "GiB（对数坐标）",
    "{name} in {formats}: weights + KV cache": "{name}（{formats}）：权重 + KV 缓存",
    "{name} in {dtype}, batch {batch}: KV cache memory = weight memory at {n} tokens per request":
        "{name}（{dtype}），批次 {batch}：每个请求 {n} 个 token 时 KV 缓存显存 = 权重显存",
    "KV cache of": "注意力结构", "weights in memory ({size} GiB)": "显存中的权重（{size} GiB）", "{g} GiB GPU": "{g} GiB GPU",
    "KV cache per token": "每个 token 的 KV 缓存", "KV cache ({batch} x {context} tokens)": "KV 缓存（{batch} x {context} 个 token）",
    "{size} ({share} of total)": "{size}（占总量 {share}）", "total": "总计",
    "KV cache memory = weight memory at": "KV 缓存显存 = 权重显存 时",
    "{tokens} tokens = {context} per request at batch {batch}": "{tokens} 个 token = 批次 {batch} 下每个请求 {context} 个",
    "<b>{model}</b> in {formats}, {params} parameters": "<b>{model}</b>（{formats}），{params} 个参数",
    "fits": "放得下", "does not fit": "放不下",
    "llama-2-7b as GQA-8 (hypothetical)": "llama-2-7b 改为 GQA-8（假设）",
    "llama-2-7b as MQA (hypothetical)": "llama-2-7b 改为 MQA（假设）",
    "weights + KV, batch {b}": "权重 + KV，批次 {b}", "verdict": "结论", "requests that fit": "放得下的请求数",
    "memory: weights, KV cache, free": "显存：权重、KV 缓存、空闲", "bars, left to right:": "条形从左到右：",
    "weights + KV": "权重 + KV", "KV memory = weight memory": "KV 显存 = 权重显存",
    "{n} requests of {context} tokens fit next to the weights": "除权重外还放得下 {n} 个 {context} token 的请求",
    "model weights (striped)": "模型权重（条纹）", "KV cache (solid)": "KV 缓存（实心）",
    "past the GPU's memory (dashed)": "超出显存的部分（虚线）",
    # -- roofline --
    " ridge {ridge}": " 脊点 {ridge}", "attention, ctx {contexts}": "注意力，上下文 {contexts}",
    "arithmetic intensity (FLOP / byte)": "算术强度（FLOP / 字节）", "attainable {unit}": "可达 {unit}",
    " ridge {ridge} FLOP/byte": " 脊点 {ridge} FLOP/字节",
    "context per sequence (positions the new token attends to)": "每个序列的上下文（新 token 关注的位置数）",
    "GB read per decode step": "每个解码步读取的 GB",
    "{model} in {dtype}: weights read vs KV-cache reads per decode step": "{model}（{dtype}）：每个解码步读取的权重与 KV 缓存",
    "{machine} roofline ({dtype}): decode with batch {b}": "{machine} 屋顶线模型（{dtype}）：批次 {b} 的解码",
    "step, ctx {ctx}": "整步，上下文 {ctx}", "weight products (any context)": "权重乘法（任意上下文）",
    "attention (any batch)": "注意力（任意批次）",
    "{model} ({kind}, {q} query / {kv} KV heads), decode in {dtype} on {machine}\nweight products compute-bound "
    "from batch {b}": "{model}（{kind}，{q} 个查询头 / {kv} 个 KV 头），在 {machine} 上以 {dtype} 解码\n权重乘法从批次 {b} 起计算受限",
    "{machine}: peak {peak} {unit} ({mdtype}), {bw} GB/s; points in {dtype}, prompt = context = {lengths}":
        "{machine}：峰值 {peak} {unit}（{mdtype}），{bw} GB/s；数据点为 {dtype}，提示词 = 上下文 = {lengths}",
    "weights read per step ({size} GB)": "每步读取的权重（{size} GB）", "batch {b}": "批次 {b}", "roof": "屋顶",
    "decode batch→∞": "解码 批次→∞",
    " (the roof is its {mdtype} peak, not a {dtype} one)": "（屋顶是它的 {mdtype} 峰值，不是 {dtype} 峰值）",
    "never reaches the ridge at this context, at any batch": "在这个上下文下，批次再大也到不了脊点",
    "reaches the ridge from batch {b}": "从批次 {b} 起到达脊点",
    "{model} in {dtype} on {machine}: peak {peak} {unit}, {bw} GB/s, ridge {ridge} FLOP/byte{note}":
        "{model}（{dtype}）在 {machine} 上：峰值 {peak} {unit}，{bw} GB/s，脊点 {ridge} FLOP/字节{note}",
    "decode, batch {batch}, context {context}: {x} FLOP/byte, {bound}; at least {ms} ms per step, at most {tps} "
    "tokens/s": "解码，批次 {batch}，上下文 {context}：{x} FLOP/字节，{bound}；每步至少 {ms} ms，最多 {tps} token/s",
    "bytes per decode step: weights read {w}, KV read {kv} ({share}% of all), KV write {kvw}; KV reads equal the "
    "weights read at context {ctx} per sequence at this batch":
        "每个解码步的字节数：读取权重 {w}，读取 KV {kv}（占全部的 {share}%），写入 KV {kvw}；在这个批次下，"
        "每个序列的上下文达到 {ctx} 时 KV 读取量等于权重读取量",
    "batching: as batch → ∞ decode tends to {x} FLOP/byte and {ridge}": "批处理：批次 → ∞ 时解码趋于 {x} FLOP/字节，{ridge}",
    "prefill of {context} tokens, batch {batch}: {x} FLOP/byte, {bound}": "{context} 个 token 的预填充，批次 {batch}：{x} FLOP/字节，{bound}",
    "KV read, batch {b}": "KV 读取，批次 {b}", "{model} decode": "{model} 解码",
    "note: context {context} is longer than this model's max_seq_len {max} (the arithmetic still holds; the model "
    "could not run it)": "注意：上下文 {context} 超过了这个模型的 max_seq_len {max}（算术仍然成立，但模型跑不了这么长）",
    "whole step, per context": "整步，按上下文", "ctx {n}": "上下文 {n}",
    "{model} decode, batch {b}, context {n}: {x} FLOP/B, {bound}, KV reads {share}% of bytes":
        "{model} 解码，批次 {b}，上下文 {n}：{x} FLOP/B，{bound}，KV 读取占字节数的 {share}%",
    "{model} batch→∞": "{model} 批次→∞", "{model} prefill": "{model} 预填充",
    "{model} decode at context {n}, batch → ∞: {x} FLOP/B": "{model} 在上下文 {n} 解码，批次 → ∞：{x} FLOP/B",
    "{model} prefill of {n} tokens: {x} FLOP/B, {bound}": "{model} 预填充 {n} 个 token：{x} FLOP/B，{bound}",
    # -- sampling --
    "{rule}: {n} of {vocab} tokens can be drawn": "{rule}：{vocab} 个 token 中有 {n} 个可被采样",
    "probability": "概率", "greedy (T=0)": "贪心（T=0）", "model, T=1": "模型，T=1",
    "bar (dark: can be drawn; light, dotted: removed; tick: model at T=1)": "条形（深色：可被采样；浅色带点：被剔除；刻线：模型在 T=1 时）",
    "p sample": "p 采样", "p model": "p 模型", "prompt <code>{prompt}</code>: {n} token(s)": "提示词 <code>{prompt}</code>：{n} 个 token",
    "seed {seed}, {n} draws: ": "随机种子 {seed}，采样 {n} 次：", "sampling distribution": "采样分布",
    "model (T=1): %{y}": "模型（T=1）：%{y}",
    "%{customdata[0]}: p sample %{customdata[1]}, before the cut %{customdata[2]}":
        "%{customdata[0]}：p 采样 %{customdata[1]}，截断前 %{customdata[2]}",
    "can be drawn (p after the cut)": "可被采样（截断后的 p）", "removed by the rule (p before the cut)": "被规则剔除（截断前的 p）",
    "next-token distribution": "下一个 token 的分布",
    # -- speculative decoding --
    "k={k}, {rule}: {n} new tokens in {passes} target passes (generate: {base}){sep}{drafts} draft passes, "
    "{kept}/{proposed} proposals kept ({rate})":
        "k={k}，{rule}：目标模型 {passes} 次前向传播生成 {n} 个新 token（单用 generate 要 {base} 次）{sep}草稿模型 {drafts} 次前向传播，"
        "{kept}/{proposed} 个提议被接受（{rate}）",
    "round {round}: {label} — {meaning}": "第 {round} 轮：{label} — {meaning}", "greedy": "贪心",
    "T={temp}, seed {seed}": "T={temp}，随机种子 {seed}", "k (draft tokens proposed per round)": "k（每轮提议的草稿 token 数）",
    "tokens per target pass": "目标模型每次前向传播的 token 数", "; p target {p}, q draft {q}": "；p 目标 {p}，q 草稿 {q}",
    ", kept with probability {a}": "，以概率 {a} 接受", "round {i}": "第 {i} 轮", "k + 1 (α = 1)": "k + 1（α = 1）",
    "1 (α = 0)": "1（α = 0）", "predicted from the measured α": "由实测 α 预测", "measured, full rounds": "实测，完整轮次",
    "measured, all passes": "实测，全部前向传播", "tokens per target pass: predicted vs measured": "目标模型每次前向传播的 token 数：预测与实测",
    "{title} — round {upto}: {new} new tokens in {passes} target passes (generate: {new})":
        "{title} — 第 {upto} 轮：目标模型 {passes} 次前向传播生成 {new} 个新 token（单用 generate 要 {new} 次）",
    "text: <code>{text}</code>": "文本：<code>{text}</code>", "target": "目标", "speculative decoding": "投机解码",
    "draft token kept": "草稿 token 被接受", "draft token rejected": "草稿 token 被拒绝", "dropped after a rejection": "拒绝后丢弃",
    "target's correction": "目标模型的修正", "target's bonus token": "目标模型的额外 token", "target alone": "仅目标模型",
    "after <eos>, unused": "<eos> 之后，未使用",
    # -- the worked example --
    "token fed": "输入的 token", "token embedding": "token 嵌入", "{token} at position {p}": "位置 {p} 上的 {token}",
    "= input to layer 0": "= 第 0 层的输入", "+ position embedding": "+ 位置嵌入",
    "<b>step {step} ({phase})</b>: fed {fed} → chose <b>{chosen}</b>": "<b>第 {step} 步（{phase}）</b>：输入 {fed} → 选出 <b>{chosen}</b>",
    "pos ({mark}: new)": "位置 （{mark}：新）",
    "<b>KV cache, layer {l}</b> ({n} rows; this step's rows highlighted and marked {mark})":
        "<b>KV 缓存，第 {l} 层</b>（{n} 行；本步写入的行高亮并标记 {mark}）",
    "generated: {text} ({n} forward passes)": "已生成：{text}（{n} 次前向传播）", "layer {l} {name}": "第 {l} 层 {name}",
    "quantity": "项目", "numbers": "数值",
    "step {step} ({phase}): feed {fed} → next token {chosen}; the cache now holds {n} K and V rows per layer":
        "第 {step} 步（{phase}）：输入 {fed} → 下一个 token {chosen}；缓存现在每层有 {n} 行 K 和 V",
    "pos": "位置", "quantity (newest token)": "量（最新 token）", "rank": "名次", "next token": "下一个 token", "prob": "概率",
    "k (new)": "k（新）", "v (new)": "v（新）", "weights @ V": "权重 @ V", "attention output": "注意力输出", "FFN output": "FFN 输出",
    # -- the static site and the classroom view (tools/site.py, tools/classroom.py) --
    "KV Cache Lab": "KV Cache Lab（KV 缓存实验室）", "all notebooks": "全部笔记本", " ({widget})": "（{widget}）",
    "Every notebook as a page made from its stored outputs: no kernel, no network. The plotly figures step with their "
    "slider and Play button. The live widgets need a kernel: open the notebooks with {lab}, or one as a classroom "
    "page with {classroom}.":
        "每个笔记本都是一个页面，内容来自笔记本里保存的输出：不需要内核，也不联网。plotly 图可以用滑块和播放按钮逐步查看。"
        "交互控件要有内核才能运行：用 {lab} 打开这些笔记本，或用 {classroom} 把其中一个作为课堂页面打开。",
    "Live widget{what}: it runs the model, so it needs a Python kernel. Open this notebook in JupyterLab ({lab}) or "
    "as a classroom page ({classroom}) to use it.":
        "交互控件{what}：它要运行模型，所以需要 Python 内核。在 JupyterLab 中打开这个笔记本（{lab}），"
        "或作为课堂页面打开（{classroom}），就能使用它。",
    "<kbd>→</kbd> / <kbd>←</kbd> step the player nearest the middle of the screen &nbsp;·&nbsp; <kbd>PgDn</kbd> / "
    "<kbd>PgUp</kbd> (or <kbd>j</kbd> / <kbd>k</kbd>) next / previous section":
        "<kbd>→</kbd> / <kbd>←</kbd> 让屏幕中间最近的播放器前进 / 后退一步 &nbsp;·&nbsp; <kbd>PgDn</kbd> / "
        "<kbd>PgUp</kbd>（或 <kbd>j</kbd> / <kbd>k</kbd>）跳到下一节 / 上一节",
    # -- the request timeline of a serving run (lib/widgets/timeline.py) --
    "request": "请求", "forward pass": "前向传播", "{policy}: {steps} passes": "{policy}：{steps} 次前向传播",
    "batching policy\x04static": "静态批处理", "batching policy\x04continuous": "连续批处理", "waiting in the queue": "在队列中等待",
    "prefill (its first pass)": "预填充（它的第一次前向传播）", "decoding": "解码",
    "finished, slot still held (static batching)": "已完成，槽位仍被占着（静态批处理）",
    # -- RoPE as a picture (lib/widgets/rope.py) --
    "pair {pair}: {deg:.1f}° per position": "第 {pair} 对：每个位置转 {deg:.1f}°",
    "one key written at positions {a}..{b}: each pair of its numbers turned by position × angle":
        "同一个键写在位置 {a}..{b}：它的每一对数都转过“位置 × 角度”",
    # -- notebooks 11-11's widgets (issue 25): the tile stepper, the ring buffer, the capacity explorer --
    # the tile stepper (lib/widgets/tiles.py)
    "step {i} of {n}: query tile {a} (rows {q0}..{q1}) × key tile {b} (keys {k0}..{k1}): {what}":
        "第 {i} 步（共 {n} 步）：查询分块 {a}（行 {q0}..{q1}）× 键分块 {b}（键 {k0}..{k1}）：{what}",
    "tile (query × key)": "分块（查询 × 键）", "what the loop does": "循环做了什么", "m of row {r}": "第 {r} 行的 m",
    "l of row {r}": "第 {r} 行的 l", "moved so far": "累计搬运",
    "plain attention moves {plain} for the same call: {x}x the tiled loop":
        "朴素注意力做同一次调用要搬运 {plain}：是分块循环的 {x} 倍",
    "key tile": "键分块", "query tile": "查询分块", "F/M + visit order, ·: skipped": "F/M + 访问顺序，·：跳过",
    "query row {r}": "查询第 {r} 行", "KiB moved (HBM)": "搬运的 KiB（HBM）",
    "the model's own output: {out}": "模型自己的输出：{out}",
    "row {r} lives in query tile {a}: not reached yet": "第 {r} 行在查询分块 {a} 中：还没轮到",
    "every key visible: computed": "所有键都可见：计算",
    "crosses the diagonal: computed with the mask": "跨过对角线：带掩码计算",
    "wholly above the diagonal: skipped, nothing loaded": "整块在对角线之上：跳过，什么都不加载",
    "running max m": "当前最大值 m", "log of running sum l": "当前和 l 的对数",
    "tiled loop, so far": "分块循环（到目前为止）", "plain attention (whole call)": "朴素注意力（整次调用）",
    "row {r}: m = {m}, l = {l}": "第 {r} 行：m = {m}，l = {l}",
    "row {r}: its tile not reached yet": "第 {r} 行：所在分块还没轮到",
    "this step works on its tile": "这一步正在处理它所在的分块",
    "its tile is done: the state it ended with": "它所在的分块已完成：这是最终状态",
    "query tile × key tile": "查询分块 × 键分块", "KiB moved from HBM": "从 HBM 搬运的 KiB",
    "bytes moved from HBM": "从 HBM 搬运的字节", "tile size": "分块大小", "view": "视图", "query row": "查询行",
    "chunks merged": "已合并的段数", "keys covered": "覆盖的键",
    "weight of each chunk, exp(lse_i − lse)": "每段的权重，exp(lse_i − lse)",
    "merged output, first {n} dims": "合并后的输出（前 {n} 维）", "plain attention": "朴素注意力",
    "split-K so far": "split-K（到目前为止）", "exact output": "精确输出", "keys {a}..{b}": "键 {a}..{b}",
    "= the merge of every chunk": "= 所有段的合并结果",
    "the model’s attention output": "模型的注意力输出", "<b>row {r}</b> ({where})": "<b>第 {r} 行</b>（{where}）",
    "FlashDecoding, one decode query: chunk {i} of {n} merged (keys 0..{end})":
        "FlashDecoding，一个解码查询：已合并第 {i} 段（共 {n} 段，键 0..{end}）",
    "merged output so far": "到目前为止的合并输出",
    "each chunk: its keys and its weight in the merge, exp(lse_i − lse)": "每一段：它的键，以及它在合并中的权重 exp(lse_i − lse)",
    "old sums × {x}": "旧的和 × {x}",
    "computed (all keys visible)": "计算（所有键可见）", "computed with the causal mask": "带因果掩码计算",
    "skipped (above the diagonal)": "跳过（在对角线之上）", "loaded now": "正在加载", "not reached yet": "还没轮到",
    "FlashAttention tiles": "FlashAttention 分块", "FlashDecoding split-K": "FlashDecoding（split-K 分段）",
    # the ring buffer (lib/widgets/ring.py)
    "position {p} ({tok}) went in; {nxt}": "位置 {p}（{tok}）已写入；{nxt}", "slot": "槽位",
    "after the token at position": "写入该位置的 token 之后", "the position each slot holds": "每个槽位保存的位置",
    "position (dotted: the window is full)": "位置（虚线：窗口已满）",
    "the last token": "这是最后一个 token",
    "running perplexity: from the next token on": "累计困惑度：从下一个 token 开始有",
    "next overwrites slot": "下一个覆盖的槽位", "next token overwrites slot {s} (empty)": "下一个 token 写入槽位 {s}（空）",
    "next token overwrites slot {s} (position {p})": "下一个 token 覆盖槽位 {s}（位置 {p}）",
    "running perplexity": "累计困惑度", "the next token overwrites it": "下一个 token 会覆盖它",
    "the slots (position, token)": "槽位（位置，token）",
    "the newest query's weight on each slot's key": "最新查询对每个槽位里的键的权重",
    "the slots, and the newest query’s weight on each key": "各槽位，以及最新查询对每个键的权重",
    "W = {w} slots: {s} sink(s) kept for good, {r} for the most recent positions, in turn":
        "W = {w} 个槽位：{s} 个汇点永久保留，{r} 个轮流存放最近的位置",
    "window W": "窗口 W", "your text": "你的文本", "sinks": "汇点数", "slot {s}": "槽位 {s}", "position ": "位置 ",
    "positions 1..{p}": "位置 1..{p}", "sink: kept for good": "汇点：永久保留", "held (the window)": "保留（窗口内）",
    "the newest token": "最新的 token", "empty": "空", "window only": "仅窗口", "window + sinks": "窗口 + 汇点",
    # the capacity explorer (lib/widgets/capacity.py)
    "{model} on {total}, gpu_memory_utilization {u}: {blocks} blocks of {bs} tokens = {tokens} tokens; "
    "{r} requests of {len} tokens":
        "{model}，显存 {total}，gpu_memory_utilization {u}：{blocks} 个块 × 每块 {bs} 个 token = {tokens} 个 token；"
        "可容纳 {r} 个 {len} token 的请求",
    "GiB of the GPU's {total}": "GPU 的 {total} 中的 GiB",
    "requests of max_model_len": "max_model_len 长的请求数", "{blocks} blocks, {r} requests": "{blocks} 个块，{r} 个请求",
    "total memory": "总显存", "× {u} = requested": "× {u} = 申请的显存", "− weights ({dtype})": "− 权重（{dtype}）",
    "− activations reserve": "− 激活预留", "= available for KV": "= 可用于 KV 的显存",
    "÷ one block ({bs} tokens, {dtype})": "÷ 一个块（{bs} 个 token，{dtype}）",
    "= blocks (vLLM logs {n} tokens)": "= 块数（vLLM 日志报告 {n} 个 token）",
    "no KV block fits: the weights and the activations reserve take more than the {req} requested":
        "一个 KV 块也放不下：权重和激活预留已超过申请的 {req}",
    "KV dtype": "KV 数据类型", "activations reserve (GiB)": "激活预留（GiB）", "KV blocks": "KV 块",
    "requests of {len} tokens": "{len} token 的请求数", "activations reserve": "激活预留",
}

ZH.update(ZH_OUTPUTS)  # lib's text outputs and the exercises' messages (lib/i18n/outputs.py)


ZH.update({  # -- figures, look and feel pass 2 (lib/widgets/*.py figure factories) --
    "key in the cache: position and token": "缓存中的键：位置与 token",
    "newest query: position and token": "最新的查询：位置与 token",
    "{name} in {dtype}, batch {batch}: at {n} tokens (the whole window) the KV cache is {share} of the weights' memory":
        "{name}（{dtype}），批次 {batch}：在 {n} 个 token（整个上下文窗口）时，KV 缓存只占权重内存的 {share}",
    "decode, batch → ∞": "解码，批次 → ∞",
    "prefill (batch 1)": "预填充（批次 1）",
})


ZH.update({  # -- the serving dashboard (lib/widgets/dashboard.py) --
    "tick": "时刻", "tick {tick}": "时刻 {tick}", "tick (one engine step)": "时刻（引擎的一步）",
    "arrived": "到达", "admitted": "接纳", "preempted": "被抢占", "finished": "已完成", "queue": "队列",
    "nothing to run": "无事可做", "decode tokens": "解码 token", "tokens fed": "输入的 token 数",
    "tokens fed this step: prefill (orange, striped) + decode (blue); dashed: the budget":
        "本步输入的 token 数：预填充（橙色斜纹）+ 解码（蓝色）；虚线：预算",
    "prefill + decode / budget": "预填充 + 解码 / 预算", "blocks used (shared)": "已用块（共享）",
    "shared prefix block": "共享的前缀块", "the block pool": "块池", "block {b}": "块 {b}",
    "The pool over time: each block's owner (#request)": "块池随时间的变化：每个块属于哪个请求（#编号）",
    "(#request: its block; ×n: a prefix block n requests share; · free, still cached)":
        "（#编号：该请求的块；×n：n 个请求共享的前缀块；· 空闲但仍在缓存中）",
    "{used} of {n} blocks in use, {shared} shared; prefix-cache hits so far: {hits} blocks":
        "{n} 个块中已用 {used} 个，其中共享 {shared} 个；前缀缓存至今命中 {hits} 个块",
    "this step’s batch": "本步的批次", "budget {b}": "预算 {b}",
    "{p} prefill + {d} decode tokens": "{p} 个预填充 token + {d} 个解码 token",
    "streamed text": "流式输出的文本", "arrival rate (per tick)": "到达率（每个时刻）",
    "#{rid} (prefill)": "#{rid}（预填充）", "your request": "你的请求",
    # the load curves (lib/widgets/load.py) and their table (lib.serving.LoadPoint.row)
    "{p}, mean": "{p}，均值", "{p}, p90": "{p}，p90 分位", "arrival rate (requests/s)": "到达率（请求/秒）",
    "time to first token (ms)": "首 token 延迟（ms）", "rate (req/s)": "到达率（请求/秒）",
    "TTFT mean (ms)": "TTFT 均值（ms）", "TTFT p90 (ms)": "TTFT p90（ms）", "TPOT mean (ms)": "TPOT 均值（ms）",
    "TPOT p90 (ms)": "TPOT p90（ms）", "mean queue": "平均队列长度", "max queue": "最长队列", "clock": "时钟",
    "prefix hit rate": "前缀缓存命中率",
    "predicted: Llama-3-8B on an H100 SXM": "预测：Llama-3-8B，H100 SXM", "measured: lm on this CPU": "实测：lm，本机 CPU",
    "on": "开", "hit rate": "命中率", "prefill tokens computed": "计算的预填充 token",
    "prompt tokens from the cache": "来自缓存的提示词 token", "answer (24 tokens, greedy)": "回答（24 个 token，贪心）", "type a prompt, press Enter: it arrives at the next tick":
        "输入提示词后按回车：它在下一个时刻到达",
})


def set_language(lang: str) -> None:
    """Choose the language widgets and figures speak: "en" or "zh"."""
    global _current
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {LANGUAGES} (English, Chinese), got {lang!r}")
    _current = lang


def language() -> str:
    """The language widgets and figures speak now."""
    return _current


@contextmanager
def speaking(lang: str):
    """``t`` answers in ``lang`` inside the block (as a kernel does after ``lib.notebook.setup(lang=...)``); the
    language before is restored after it."""
    before = language()
    set_language(lang)
    try:
        yield
    finally:
        set_language(before)


def t(text: str, /, **fields) -> str:
    """``text`` in the current language (formatted with ``fields`` after translation, so a translation may
    move them)."""
    out = ZH.get(text, text) if _current == "zh" else text
    if CONTEXT in out:  # English with a context (or an untranslated one): the text after the separator
        out = out.split(CONTEXT, 1)[1]
    return out.format(**fields) if fields else out


def say(text: str, /, *, markdown: bool = False) -> str:
    """A text lib did not write, already filled in (a title or a ``why`` a notebook cell hands to lib, a table's
    cell), in the current language: a whole text of ``ZH``, or each line by the templates of
    ``lib.i18n.outputs.ZH_PRINTED`` (``translate_printed``); a text found in neither stays as it is. lib's own
    texts go through ``t``, which fills the placeholders after translating; ``say`` is for a text whose values are
    already in it, and a caller names it where it happens (``lib.exercises.reveal``'s ``why``, a figure title a
    cell passes, ``lib.text.text_table(..., translate=True)``). ``markdown``: ``text`` is a Markdown table, said
    cell by cell (a bold cell inside its ``**``; ``lib.text.markdown_table``)."""
    return translate_printed(text, ZH, whole=True, markdown=markdown) if _current == "zh" else text


def ordinal(n: int) -> str:
    """The n-th, counted from 1, in the current language: "1st", "2nd", "3rd", "11th", "22nd" in English; "第 3 个"
    in Chinese (a template writes "the {nth} new token" / "{nth}新 token")."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"an ordinal counts from 1, got {n!r}")
    if _current == "zh":
        return f"第 {n} 个"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def colon() -> str:
    """What joins a label to its value in the current language: ": " in English, the full-width "：" in Chinese."""
    return "：" if _current == "zh" else ": "


def parens(text: str) -> str:
    """``text`` in parentheses after a word: " (text)" in English, "（text）" (full-width, no space) in Chinese."""
    return f"（{text}）" if _current == "zh" else f" ({text})"


ZH.update({  # -- errors a notebook asks the learner to read (02's context window, 09's exhausted pool); the type stays
    "a prompt of {prompt_len} tokens leaves room for at most {room} new token(s) in the context window "
    "(max_seq_len={max_seq_len}), but {name}={n_new}":
        "{prompt_len} 个 token 的提示词在上下文窗口（max_seq_len={max_seq_len}）里最多只留得下 {room} 个新 token，"
        "但 {name}={n_new}",
    "sequence too long for the context window{row}: positions{within} {first}..{end} were asked for, but this model "
    "has max_seq_len={max_seq_len} (positions 0..{last})":
        "序列超出了上下文窗口{row}：要用到位置{within} {first}..{end}，但这个模型的 max_seq_len={max_seq_len}"
        "（位置 0..{last}）",
    " (row {b})": "（第 {b} 行）", " within the cache": "（按缓存内的位置计）",
    "KV block pool exhausted: {what} needs {needed} free block(s) of {block_size} tokens, but only {free} of "
    "{n_blocks} are free. Release finished sequences, preempt a running one, let the request wait, or build a pool "
    "with more blocks (n_blocks >= {least} would do).":
        "KV 块池已用尽：{what}需要 {needed} 个空闲块（每块 {block_size} 个 token），但 {n_blocks} 个块中只有 {free} 个"
        "空闲。可以释放已完成的序列、抢占一个正在运行的序列、让请求等待，或者建一个块更多的池（n_blocks >= {least} 就够）。",
    "this request": "这个请求", "this sequence": "这个序列", "sequence {name}": "序列 {name} ",
    "appending {n} token(s) to {m} sequence(s)": "向 {m} 个序列追加 {n} 个 token，",
})

ZH.update({  # -- nb01 -- the decoder block as a diagram (lib/widgets/decoder_diagram.py)
    "one decoder block (layer ℓ)": "一个解码器块（第 ℓ 层）", "h {shape}": "残差流 h {shape}",
    "causal attention, {h} heads\nsoftmax(QKᵀ/√{d} + mask) · V": "因果注意力，{h} 个头\nsoftmax(QKᵀ/√{d} + 掩码) · V",
    "RoPE turns Q and K by position": "RoPE 按位置旋转 Q 和 K", "KV cache, layer ℓ": "KV 缓存，第 ℓ 层",
    "write {kv}": "写入 {kv}", "read all S so far": "读出已有的全部 S 个位置",
    "FFN, each position alone": "FFN，逐个位置单独计算", "inside:\n{shape}": "内部：\n{shape}",
    "to the next block {shape}": "送往下一块 {shape}", "residual": "残差", "the whole model": "整个模型",
    "token ids {shape}": "输入的 token id {shape}", "decoder block (left)\n× {n} layers": "解码器块（左图）\n× {n} 层",
    "logits {shape}": "输出 logits {shape}",
    "B: sequences in the batch, T: tokens fed in this pass, S: positions held in the cache":
        "B：批次中的序列数，T：本次输入的 token 数，S：缓存中已有的位置数",
    "learned weights (a matrix product)": "可学习的权重（一次矩阵乘法）", "KV cache (notebook 03)": "KV 缓存（笔记本 03）",
    "tok_emb ({n} rows)": "tok_emb（{n} 行）", "pos_emb ({n} rows)": "pos_emb（{n} 行）",
})
ZH.update({  # -- nb0204 -- 02's timing figure (drawn in the notebook's cell: its title, note and legend)
    "fastest of 5 repeats per point; a point above its neighbours is the machine, not the model":
        "每个点取 5 次重复中最快的一次；比相邻点高出一截的，是机器的波动，不是模型",
    "step 0: both feed one token, the same work;": "第 0 步：两者都只送入一个 token，工作量相同；",
    "the cache pays off once there is a history": "有了历史，缓存才见效",
    "with cache (1 token fed per step)": "有缓存（每步送入 1 个 token）",
    "without cache (whole sequence fed per step)": "无缓存（每步送入整个序列）",
})
ZH.update({  # -- nb03 -- the cache tensor as a picture (lib/widgets/cache_tensor.py)
    "{name} of layer 0": "第 0 层的 {name}",
    "+ {n} more layers behind,\nthe same shape": "后面还叠着 {n} 层，\n形状相同",
    "one decode step appends this slice {shape} to K and to V\nin each of the {L} layers: "
    "{bytes:,} bytes per token ({dtype})":
        "每个解码步往 K 和 V 各追加这样一片 {shape}，\n{L} 层都是如此：每个 token {bytes:,} 字节（{dtype}）",
    "position (the T axis): {filled} of {T} written, the rest reserved up front":
        "位置（T 轴）：{T} 个位置已写入 {filled} 个，其余是预先预留的",
    "one layer's KV cache as lib.KVCache holds it: K and V, each (B, n_kv_heads, T, head_dim) = "
    "{shape}\none cell = one head's vector of {D} numbers; all {L} layers reserve {reserved:,} bytes, "
    "the written positions hold {held:,}":
        "lib.KVCache 里一层的 KV 缓存：K 和 V 的形状都是 (B, n_kv_heads, T, head_dim) = {shape}\n"
        "一格 = 一个头的一个向量，{D} 个数；{L} 层共预留 {reserved:,} 字节，已写入的位置占 {held:,} 字节",
    "written by an earlier pass": "之前的前向传播写入", "appended by the last decode step": "上一个解码步追加",
    "reserved, not written yet": "已预留，尚未写入",
})
ZH.update({  # -- nb0506 -- where the KV cache sits in GPU memory while serving (lib/widgets/gpu_memory.py, notebook 05)
    "KV blocks holding tokens": "存着 token 的 KV 块", "empty KV blocks": "未用的 KV 块",
    "free (not requested)": "空闲（vLLM 未申请）", "running": "运行中",
    "waiting": "等待中",
    "{used} of {blocks} blocks: {running} requests run, {waiting} wait":
        "{blocks} 个块用了 {used} 个：{running} 个请求在跑，{waiting} 个在等",
    "{used} of {blocks} blocks hold {tokens} tokens": "{blocks} 个块中的 {used} 个存着 {tokens} 个 token",
    "{u} × {total} requested": "申请 {u} × {total}",
    "KV block pool, allocated at start-up: {blocks} blocks × {bs} tokens = {tokens} tokens":
        "KV 块池，启动时一次分配：{blocks} 个块 × {bs} 个 token = {tokens} 个 token",
    "GiB of the {gpu}'s {total} (what CUDA reports)": "GiB（{gpu} 共 {total}，即 CUDA 报告的总量）",
    "{model} in {dtype}, {context} tokens per request: where the memory goes":
        "{model}（{dtype}），每个请求 {context} 个 token：显存都去了哪里",
})
ZH.update({  # -- nb1113 -- bring your own model: the pickers' entry for a converted checkpoint
    "your model": "你的模型",
    "this machine ({device})": "本机（{device}）",
})
ZH.update({  # -- nb0708 -- the panel titles of 08's tokens-per-pass figure (plot_tokens_per_pass puts them through t)
    "greedy, English passages": "贪心，英文段落", "greedy, Chinese poems": "贪心，中文诗",
    "temperature 1, English passages": "温度 1，英文段落", "temperature 1, Chinese poems": "温度 1，中文诗",
})
