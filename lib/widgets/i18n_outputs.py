"""The Chinese of lib's text outputs (not its widgets): the tables and sentences a notebook prints through lib
(``Trace.table``, the worked example's tables, the vLLM map, ...), the sentences a notebook cell prints through
``lib.t``, and every exercise's title, hint, case and feedback (``lib.exercises``). ``lib.widgets.i18n`` merges
this table into ``ZH``; its rules hold here too (same placeholders, terms from ``notebooks/zh/GLOSSARY.md``).
Kept apart from the widgets' words so that each table stays one screenful of one kind of text.
"""
from __future__ import annotations

ZH_OUTPUTS: dict[str, str] = {
    # -- Trace.table (lib/trace.py) --
    "(no steps)": "（没有步骤）", "trace column\x04step": "步", "trace column\x04phase": "阶段",
    "trace column\x04fed": "输入", "trace column\x04positions": "位置", "trace column\x04kv_computed": "计算 K/V",
    "trace column\x04kv_read": "读取 K/V", "trace column\x04next": "下一个", "trace column\x04p(next)": "p(下一个)",
    "trace column\x04cache_bytes": "缓存字节",
    # -- the worked example's text tables (lib/widgets/worked.py) --
    "candidate {token}": "候选 {token}", " head {h}": " 头 {h}", "k (new, appended)": "k（新，已追加）",
    "v (new, appended)": "v（新，已追加）", "residual stream": "残差流",
    "step {step} ({phase}): fed {fed} at position {pos}; the cache holds positions 0..{last} after it ({n} K and {n} "
    "V rows per layer)": "第 {step} 步（{phase}）：在位置 {pos} 输入 {fed}；之后缓存存有位置 0..{last}（每层 {n} 行 K、{n} 行 V）",
    "chosen (greedy): {token}": "选中（贪心）：{token}",
    "KV cache after step {step}: {n} position(s)": "第 {step} 步之后的 KV 缓存：{n} 个位置",
    "written\x04new": "新", "written": "写入", "logit {logit}  probability {p}": "logit {logit}  概率 {p}",
    # -- lib.exercises: the messages of check() --
    "your result": "你的结果",
    "a tensor of shape {shape} and dtype {dtype}": "形状为 {shape}、dtype 为 {dtype} 的张量",
    "a {kind}": "一个 {kind}",
    "{what} is {got}; a tensor was expected": "{what}是{got}；应为张量",
    "{what} has shape {shape}, which is not the expected shape": "{what}的形状是 {shape}，不是预期的形状",
    "{what} has dtype {dtype}, which is not the expected dtype": "{what}的 dtype 是 {dtype}，不是预期的 dtype",
    "{what} holds NaN or inf": "{what}中有 NaN 或 inf",
    "{what} has the right shape but its values are off: the largest difference is {diff} (at index {where}; "
    "tolerance {atol})": "{what}的形状对，但数值有偏差：最大差值 {diff}（在下标 {where} 处；容差 {atol}）",
    "{what} is {got}; a {kind} was expected": "{what}是{got}；应为 {kind}",
    "{what} has {n} items, which is not the expected number": "{what}有 {n} 项，个数不对",
    "item {i} of {what}": "{what}的第 {i} 项",
    "{what} should be a dict with the keys {keys}": "{what}应是键为 {keys} 的 dict",
    "{what} is {got}, which is not the expected answer": "{what}是 {got}，不是正确答案",
    "{what} is {got}; a number was expected": "{what}是{got}；应为数",
    "{what} is {got}, which is not the expected value": "{what}是 {got}，不是预期的值",
    "✗ {title}: check() needs your function itself, got {got}.": "✗ {title}：check() 要的是你的函数本身，收到的是{got}。",
    "… {title}: not written yet — replace the `raise NotImplementedError` with your code and run the cell again."
    "\n  Hint: {hint}": "… {title}：还没写——把 `raise NotImplementedError` 换成你的代码，再运行这个单元格。\n  提示：{hint}",
    "✗ {title} — case {i} of {n} ({case}): your function raised {error}: {e}\n  Hint: {hint}":
        "✗ {title}——第 {i} 个用例（共 {n} 个；{case}）：你的函数抛出了 {error}：{e}\n  提示：{hint}",
    "✗ {title} — case {i} of {n} ({case}): {problem}\n  Hint: {hint}":
        "✗ {title}——第 {i} 个用例（共 {n} 个；{case}）：{problem}\n  提示：{hint}",
    "✓ {title}: the hidden case passes.": "✓ {title}：隐藏用例通过。",
    "✓ {title}: all {n} hidden cases pass.": "✓ {title}：{n} 个隐藏用例全部通过。",
    # -- lib.exercises: titles and hints --
    "Causal attention for every head": "每个头的因果注意力",
    "scores = q @ kᵀ / √hd (hd = q.shape[-1]); set the entries above the diagonal to -inf (a query sees its own key "
    "and earlier ones); softmax over the last dimension; multiply by v.":
        "scores = q @ kᵀ / √hd（hd = q.shape[-1]）；把对角线以上的元素设为 -inf（查询只看得到自己和之前的键）；"
        "在最后一维上做 softmax；再乘以 v。",
    "The greedy generation loop": "贪心生成循环",
    "repeat max_new_tokens times: run the model on the whole list so far, take the argmax of the LAST position's "
    "logits, append it; stop right after appending eos_id (eos_id may be None: then never stop early). Return "
    "prompt + new tokens as a list of ints.":
        "重复 max_new_tokens 次：把目前的整个列表送入模型，取最后一个位置 logits 的 argmax，追加到列表末尾；"
        "追加了 eos_id 就立即停止（eos_id 可以是 None：那就不提前停止）。返回提示词 + 新 token，类型为 int 列表。",
    "Append a key to a preallocated cache with its RoPE rotation": "把旋转好（RoPE）的键追加进预分配的缓存",
    "the new token sits at position seq_len (the number of tokens already cached): rotate its key with "
    "lib.model.rope_tables(hd, torch.tensor([[seq_len]]), theta) and lib.model.apply_rope (they want 4-D tensors "
    "(B, heads, T, hd)), then write it at cache_k[:, seq_len]; leave every other row as it is.":
        "新 token 的位置是 seq_len（已缓存的 token 数）：用 lib.model.rope_tables(hd, torch.tensor([[seq_len]]), "
        "theta) 和 lib.model.apply_rope 旋转它的键（二者要 4 维张量 (B, heads, T, hd)），再写到 "
        "cache_k[:, seq_len]；其余各行保持不变。",
    "One attention row of the worked case": "算例中的一行注意力",
    "score_j = q·k_j / √hd for every cached key (hd = 4 here), weights = softmax of the scores, output = Σ_j "
    "weight_j · v_j. Return the pair (weights, output).":
        "对每个缓存的键算 score_j = q·k_j / √hd（这里 hd = 4），weights = scores 的 softmax，"
        "output = Σ_j weight_j · v_j。返回 (weights, output) 这一对。",
    "Block-table lookup": "查块表",
    "position // block_size says which entry of the table (the logical block) to read; position % block_size is "
    "the offset inside that physical block; the flat slot counts whole blocks of block_size slots before it.":
        "position // block_size 给出要读块表的哪一项（逻辑块）；position % block_size 是在该物理块内的偏移；"
        "扁平槽位号 = 它前面的整块数 × block_size + 偏移。",
    "Blocks a sequence takes": "一个序列占几个块",
    "divide the length by the block size and round UP (a partly filled last block is still a whole block); the "
    "empty slots are the blocks' slots minus the tokens.":
        "长度除以块大小，向上取整（最后一块只填了一部分，也算一整块）；空槽位数 = 这些块的槽位总数 − token 数。",
    "int8 quantization of keys and values, one scale per (token, head)": "键和值的 int8 量化，每个（token，头）一个 scale",
    "scale = the largest |x| of each vector (last dimension) / 127, kept with keepdim=True; q = round(x / scale) "
    "as torch.int8; a vector of zeros needs a scale that does not divide by 0":
        "scale = 每个向量（最后一维）的最大 |x| / 127，用 keepdim=True 保留这一维；q = round(x / scale)，"
        "类型为 torch.int8；全零向量的 scale 不能让除法除以 0",
    "the KV-cache size formula": "KV 缓存大小公式",
    "2 (K and V) x layers x KV heads (config.n_kv_heads, not n_heads) x head_dim x bytes per number x tokens x "
    "batch; int4 is half a byte per number":
        "2（K 和 V）× 层数 × KV 头数（config.n_kv_heads，不是 n_heads）× head_dim × 每个数的字节数 × token 数 × "
        "批次；int4 每个数半个字节",
    "Merge two partial softmax results": "合并两个部分 softmax 结果",
    "m is the larger of the two maxima; multiply each side's l and acc by exp(its m - m) before adding (acc has one "
    "more dimension than m: use m[..., None]). Never take exp of a score or of m alone.":
        "m 取两个最大值中较大的那个；相加之前，把每一边的 l 和 acc 乘以 exp(该边的 m - m)（acc 比 m 多一维：用 "
        "m[..., None]）。不要单独对某个分数或 m 取 exp。",
    "The ring buffer's slot of a position": "某个位置在环形缓冲区中的槽位",
    "without sinks, position p goes to slot p % window; with sinks, positions below `sinks` keep their own slot "
    "and the rest go round the other window - sinks slots, starting after the sinks.":
        "没有汇点时，位置 p 放在槽位 p % window；有汇点时，小于 `sinks` 的位置各占自己的槽位，"
        "其余位置从汇点之后开始，在剩下的 window - sinks 个槽位里轮转。",
    "The sliding-window mask of a chunk": "一段查询的滑动窗口掩码",
    "a query at position p may see a key at position j when j <= p (causal) and j > p - window (the last `window` "
    "positions, p itself included); compare the positions, not the indices.":
        "当 j <= p（因果）且 j > p - window（最近 `window` 个位置，含 p 自己）时，位置 p 的查询看得到位置 j 的键；"
        "比较的是位置，不是下标。",
    "The acceptance rule of speculative decoding": "投机解码的接受规则",
    "keep x with probability min(1, p[x] / q[x]); after a rejection the target draws from max(0, p - q), divided "
    "by its sum so it adds up to 1 (and if p == q, nothing is left: use p)":
        "以概率 min(1, p[x] / q[x]) 接受 x；被拒绝后，目标模型从 max(0, p - q) 采样，先除以它的和使总和为 1"
        "（若 p == q，什么都不剩：就用 p）",
    "Expected tokens per target pass": "目标模型每次前向传播的期望 token 数",
    "the first i proposals are all kept with probability α^i; the target always adds one token of its own, so the "
    "expected count is 1 + α + α² + … + α^k (careful at α = 1)":
        "前 i 个提议全被接受的概率是 α^i；目标模型总会再补一个自己的 token，所以期望个数是 "
        "1 + α + α² + … + α^k（α = 1 时要小心）",
    "KV blocks vLLM allocates": "vLLM 分配的 KV 块数",
    "Take gpu_memory_utilization of the total (rounded up to a whole byte, as vLLM does), subtract the weights and "
    "the activation peak, then divide by the bytes of ONE block: keys and values (×2) of block_size tokens in "
    "every layer. Keep whole blocks only (//), and none when nothing is left.":
        "取总量的 gpu_memory_utilization（和 vLLM 一样向上取整到整字节），减去权重和激活峰值，"
        "再除以一个块的字节数：每层 block_size 个 token 的键和值（×2）。只保留整块（//），什么都不剩时为 0 块。",
    "Arithmetic intensity of a weight product": "权重乘法的算术强度",
    "FLOPs: 2 per multiply-add, one multiply-add per weight per sequence in the batch; bytes: the weights, read "
    "once for the whole batch (activations are left out, as in lib.costs). Compute-bound when intensity × "
    "bandwidth reaches the peak.":
        "FLOPs：每次乘加算 2 个，批次中每个序列对每个权重做一次乘加；字节：权重，整个批次只读一次"
        "（和 lib.costs 一样不计激活）。强度 × 带宽达到峰值时就是计算受限。",
    # -- lib.exercises: the hidden cases --
    "the chat model's layer {layer} on {prompt}: q, k, v of shape {shape}":
        "chat 模型第 {layer} 层处理 {prompt}：q、k、v 的形状为 {shape}",
    "an end token": "有结束 token", "no end token (eos_id=None)": "没有结束 token（eos_id=None）",
    "prompt {prompt}, max_new_tokens={n}, {stop}": "提示词 {prompt}，max_new_tokens={n}，{stop}",
    "{n} tokens cached in a buffer of {max_len} positions, {heads} KV heads of head_dim {hd}":
        "{max_len} 个位置的缓冲区里已缓存 {n} 个 token，{heads} 个 KV 头，head_dim 为 {hd}",
    "step {step}, layer {layer}: one query and {n} cached key(s)": "第 {step} 步，第 {layer} 层：一个查询和 {n} 个缓存的键",
    "one query row, its 6 keys split into two halves": "一行查询，它的 6 个键分成两半",
    "4 query rows; the second part's scores are larger, so its maximum wins": "4 行查询；后一部分的分数更大，所以取它的最大值",
    "scores in the hundreds (exp of a score alone overflows float32)": "分数上百（单独对分数取 exp 会让 float32 溢出）",
    "a batch: states of shape (batch 2, heads 3, queries 5), acc with head_dim 4":
        "一个批次：状态的形状为（批次 2，头 3，查询 5），acc 的 head_dim 为 4",
    "{what} (table {blocks}, blocks of {size}, position {position})": "{what}（块表 {blocks}，块大小 {size}，位置 {position}）",
    "a position in the middle of the third logical block": "第三个逻辑块中间的一个位置",
    "the very first position of a sequence": "序列的第一个位置", "the first position of a new block": "新块的第一个位置",
    "the last slot of a block": "块的最后一个槽位", "blocks of a single position": "每块只有一个位置",
    "{what} ({n} tokens, blocks of {size})": "{what}（{n} 个 token，块大小 {size}）",
    "a sequence that ends inside a block": "在块中间结束的序列", "a sequence that fills its blocks exactly": "正好填满所占块的序列",
    "a single token": "只有一个 token", "one token past a block boundary": "超出块边界一个 token",
    "return a pair (q, scale): the int8 numbers and one scale per vector": "返回一对 (q, scale)：int8 数值和每个向量一个 scale",
    "q should be a tensor of dtype torch.int8, got {got}": "q 应是 dtype 为 torch.int8 的张量，收到的是 {got}",
    "q has shape {shape}: it should have the shape of x": "q 的形状是 {shape}：它应与 x 同形",
    "scale has shape {shape}: there is one scale per vector of head_dim numbers, kept as a last dimension of size 1 "
    "so that q * scale broadcasts":
        "scale 的形状是 {shape}：每个含 head_dim 个数的向量一个 scale，保留为大小为 1 的最后一维，q * scale 才能广播",
    "the scales are off: each vector's scale maps its largest magnitude onto 127": "scale 不对：每个向量的 scale 应把它的最大绝对值映射到 127",
    "q leaves the symmetric range -127..127": "q 超出了对称范围 -127..127",
    "some q are more than one step away from x / scale: round x / scale to the nearest integer":
        "有些 q 与 x / scale 相差超过一格：把 x / scale 四舍五入到最近的整数",
    "some q are rounded the wrong way: take the nearest integer of x / scale": "有些 q 舍入方向不对：取 x / scale 最近的整数",
    "keys of shape {shape}: {what}": "形状为 {shape} 的键：{what}",
    "one vector holds a large outlier": "有一个向量含很大的离群值", "one vector is all zeros": "有一个向量全为零",
    "the chat model's shape: 4 KV heads, head_dim 16": "chat 模型的形状：4 个 KV 头，head_dim 16",
    "{name}, {tokens} tokens x batch {batch}, {fmt}": "{name}，{tokens} 个 token × 批次 {batch}，{fmt}",
    "{what}: W is {d_in} x {d_out}": "{what}：W 为 {d_in} x {d_out}",
    "one sequence decoding in bf16 on an H100": "H100 上以 bf16 解码一个序列", "a batch of 512 in bf16 on an H100": "H100 上以 bf16 解码批次 512",
    "a batch of 256 in bf16 on an H200": "H200 上以 bf16 解码批次 256", "a batch of 8 in fp32 on a small CPU": "小 CPU 上以 fp32 解码批次 8",
    "one sequence with int8 weights": "int8 权重，一个序列",
    "four tokens, {what}": "四个 token，{what}",
    "the draft proposes a token it likes more than the target does": "草稿模型提议一个它比目标模型更看好的 token",
    "the draft proposes a token the target likes more": "草稿模型提议一个目标模型更看好的 token",
    "the draft proposes a token the target never says": "草稿模型提议一个目标模型从不会说的 token",
    "nine tokens, random distributions (seed {seed}), the draft's favourite proposed":
        "九个 token，随机分布（随机种子 {seed}），提议草稿模型最看好的那个",
    "a draft that agrees exactly with the target": "与目标模型完全一致的草稿模型", " (every proposal kept)": "（每个提议都被接受）",
    "a Llama-2-7B-shaped model (32 layers, 32 KV heads) in bf16 on an 80 GiB GPU, utilization 0.92, 2 GiB of "
    "activations, blocks of 16": "Llama-2-7B 形状的模型（32 层，32 个 KV 头），bf16，80 GiB GPU，利用率 0.92，"
                                 "激活 2 GiB，块大小 16",
    "a GQA model (32 layers, 8 KV heads) in fp16 on a 141 GiB GPU, utilization 0.9, 3 GiB of activations, blocks "
    "of 32": "GQA 模型（32 层，8 个 KV 头），fp16，141 GiB GPU，利用率 0.9，激活 3 GiB，块大小 32",
    "a small fp32 model on a GPU whose total times the utilization is not a whole number of bytes":
        "fp32 小模型，GPU 总量乘以利用率不是整字节数",
    "a model whose weights alone exceed the utilization budget": "光权重就超出利用率预算的模型",
    "{n} sinks": "{n} 个汇点", "no sinks": "没有汇点",
    "position {position}, a window of {window} slots, {what}": "位置 {position}，窗口 {window} 个槽位，{what}",
    "queries at positions {q0}..{q1}, keys at positions {k0}..{q1}, window {window}":
        "查询在位置 {q0}..{q1}，键在位置 {k0}..{q1}，窗口 {window}",
}
