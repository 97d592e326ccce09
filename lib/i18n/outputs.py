"""The Chinese of lib's text outputs (not its widgets): the tables and sentences a notebook prints through lib
(``Trace.table``, the worked example's tables, the vLLM map, ...) and every exercise's title, hint, case and
feedback (``lib.exercises``) in ``ZH_OUTPUTS``, which ``lib.i18n`` merges into ``ZH``; the lines lib shows already
filled in (a table's cells, ``costs.describe``, ``memory_table``, a ``why`` or title a cell hands to lib) in
``ZH_PRINTED``, matched line by line by ``translate_printed`` when lib calls ``lib.i18n.say``. Nothing patches
``print``: a notebook cell's own words are in its code, per edition (the Chinese edition's code blocks,
``tools.edition``). Its rules are ``lib.i18n``'s (same placeholders, terms from ``notebooks/zh/GLOSSARY.md``).
Kept apart from the widgets' words so that each table stays one screenful of one kind of text; like ``lib.i18n``
it imports nothing from lib.
"""
from __future__ import annotations

import os
import re

ZH_OUTPUTS: dict[str, str] = {
    # -- the four sections of teaching pass 4: quantized weights (06), the flat batch (09), tensor parallelism and the
    #    transformers cache classes (13) --
    "speedup": "加速比", "keeps K and V": "K 和 V 怎样存", "notebook": "笔记本", "bytes held": "占用字节",
    "bytes of tokens": "存 token 的字节", "grows by torch.cat each step": "每步用 torch.cat 加长",
    "preallocated to max_cache_len": "按 max_cache_len 预分配", "a ring of window slots": "窗口大小的环形缓冲区",
    "old tokens quantized": "较早的 token 量化存储", "blocks through a block table": "经块表找到的块",
    "StaticCache, sliding layers": "StaticCache，滑动窗口层", "(vLLM) paged pool": "（vLLM）分页块池",
    "weights per GPU": "每块 GPU 的权重",
    "KV heads per GPU": "每块 GPU 的 KV 头", "KV per token per GPU": "每块 GPU 每个 token 的 KV",
    "sequences of 4,096 tokens": "4,096 token 的序列数",
    # -- the build-it exercises of the real machinery (lib/exercises/machinery.py) --
    "One speculative round: verify, accept, roll back": "一轮投机解码：验证、接受、回滚",
    "feed [pending, *drafts] in one call with the cache; row i of the logits is the target's choice after the i-th "
    "prefix. Keep drafts while they equal those choices, then add the target's choice at the first mismatch (or "
    "after the last draft). Finally crop the cache to its length before the call + 1 + the number kept.":
        "连同缓存一次输入 [pending, *drafts]；logits 的第 i 行是目标模型在第 i 个前缀之后的选择。草稿与这些选择相同就保留，"
        "在第一个不同之处（或最后一个草稿之后）加上目标模型的选择。最后把缓存裁剪到：调用前的长度 + 1 + 保留的草稿数。",
    "Gather a sequence's keys through its block table": "按块表收集一个序列的键",
    "index the pool with the table (pool_k[table] keeps the table's order), move the heads first (transpose(0, 1)), "
    "lay the blocks end to end (reshape to (heads, blocks × block_size, head_dim)) and keep the first n_tokens "
    "positions: the last block is only partly full.":
        "用块表索引池子（pool_k[table] 保持块表的顺序），把头挪到最前（transpose(0, 1)），把各块首尾相接（reshape 成 "
        "(heads, blocks × block_size, head_dim)），只保留前 n_tokens 个位置：最后一块只装了一部分。",
    "your new tokens": "你生成的新 token", "the tokens your round returns": "你这一轮返回的 token",
    "the cached keys of layer {l}": "第 {l} 层缓存的键",
    "your loop never handed the model a cache: pass cache=your_cache to every call":
        "你的循环从没把缓存交给模型：每次调用都要传 cache=your_cache",
    "your loop used more than one cache: make one before the prefill and pass it to every call":
        "你的循环用了不止一个缓存：在预填充之前建一个，之后每次调用都传同一个",
    "that is lib's {name}: the exercise is to use your own class (a subclass of CacheBase)":
        "这是 lib 的 {name}：这道练习要用你自己的类（CacheBase 的子类）",
    "the real model lm, prompt {prompt} ({n_ids} tokens), {n} new tokens":
        "真实模型 lm，提示词 {prompt}（{n_ids} 个 token），生成 {n} 个新 token",
    "after your round the cache holds {n} positions: roll it back (cache.crop) so it holds the text up to the "
    "pending token and the kept drafts, nothing rejected":
        "这一轮之后缓存里有 {n} 个位置：用 cache.crop 回滚，只留下到 pending 为止的文本和被保留的草稿，不留任何被拒绝的位置",
    "every draft is what the target would say": "每个草稿都是目标模型自己会说的", "the third draft is wrong": "第三个草稿是错的",
    "the first draft is wrong": "第一个草稿就错了",
    "the real model lm after {prompt}, {n} drafts, {what}": "真实模型 lm，接在 {prompt} 之后，{n} 个草稿，{what}",
    "the real model's layer-0 key pool (blocks of 4), a sequence of {n} tokens in blocks {blocks}":
        "真实模型第 0 层的键池（每块 4 个位置），一个 {n} 个 token 的序列，位于块 {blocks}",
    # -- this round's table words: 07's watermark table, 08's attention regimes, 11's start-up column --
    "tokens recomputed": "重计算的 token", "seconds on an H100": "H100 上的秒数", "FLOP/byte": "FLOP/字节",
    "attention in decode": "解码中的注意力", "MHA, one cache per sequence": "MHA，每个序列一份缓存",
    "GQA (4 query heads per KV head)": "GQA（每个 KV 头 4 个查询头）", "MLA absorbed (DeepSeek-V3)": "吸收后的 MLA（DeepSeek-V3）",
    "MLA absorbed, fp8 cache, bf16 math": "吸收后的 MLA，fp8 缓存，bf16 计算", "vLLM starts": "vLLM 能否启动",
    "device: {device}   torch {version}   seed {seed}": "设备：{device}   torch {version}   随机种子 {seed}",
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
    # -- the vLLM map (lib/vllm_bridge.py): ideas, what vLLM does, how lib differs --
    "  vLLM: {text}.": "  vLLM 中：{text}。", "  lib:  {text}.": "  lib 中： {text}。",
    "block pool": "块池",
    "the same order: lib.blocks.BlockAllocator puts a freed block the prefix index does not hold at the front and a "
    "cached one at the back":
        "顺序相同：lib.blocks.BlockAllocator 把前缀索引里没有的空闲块放到队首，把缓存着的块放到队尾",
    "every step the scheduler picks the running and waiting requests that fit a token budget, at most max_num_seqs "
    "of them; None means a default per GPU (EngineArgs.get_batch_defaults): 1024 on an H100 or H200 (70 GiB or "
    "more, not an A100), 256 on smaller GPUs":
        "每一步，调度器挑出放得进 token 预算的运行中和等待中的请求，最多 max_num_seqs 个；None 表示按 GPU 取默认值"
        "（EngineArgs.get_batch_defaults）：H100 或 H200（70 GiB 及以上，A100 除外）上是 1024，更小的 GPU 上是 256",
    "the tokens one step may feed, decode tokens first, then (chunks of) prompts; None means a default per GPU and "
    "entry point: 16384 for vllm.LLM and 8192 for the OpenAI server on an H100 or H200, 8192 / 2048 on smaller GPUs; "
    "a prompt longer than what is left is cut into chunks (chunked prefill, on by default)":
        "一步最多能输入的 token 数，先给解码 token，再给提示词（或提示词的分块）；None 表示按 GPU 和入口取默认值："
        "H100 或 H200 上 vllm.LLM 是 16384、OpenAI 服务是 8192，更小的 GPU 上是 8192 / 2048；"
        "比剩余预算长的提示词会被切成几段（分块预填充，默认开启）",
    "token budget per step": "每步的 token 预算",
    "lib.serving.serve has no token budget: a step prefills every admitted prompt whole":
        "lib.serving.serve 没有 token 预算：一步把每个接纳的提示词整段预填充",
    "'auto' stores K and V in the model's dtype; 'fp8' (e4m3) or 'fp8_e5m2' halve a 16-bit cache with one scale per "
    "layer; 'int8_per_token_head' (and fp8_ / int4_per_token_head) computes one scale per token and KV head as it "
    "writes":
        "'auto' 用模型的数据类型存 K 和 V；'fp8'（e4m3）或 'fp8_e5m2' 让 16 位缓存减半，每层一个缩放因子；"
        "'int8_per_token_head'（以及 fp8_ / int4_per_token_head）在写入时为每个 token、每个 KV 头各算一个缩放因子",
    "lib.QuantizedKVCache is the int8_per_token_head scheme (absmax / 127 per token and head); lib.costs counts any "
    "dtype's bytes; kv_capacity takes the 16-bit and fp8 choices":
        "lib.QuantizedKVCache 就是 int8_per_token_head 方案（每个 token、每个头取 absmax / 127）；lib.costs 能算任何"
        "数据类型的字节数；kv_capacity 接受 16 位和 fp8 两种选择",
    "all KV blocks of the GPU in one pool: a free queue, reference counts, a hash → block map for prefix caching; "
    "block 0 is a placeholder (null block) no request uses":
        "GPU 上所有 KV 块放在一个池里：一个空闲队列、引用计数、一张供前缀缓存用的哈希 → 块映射；块 0 是占位用的空块（null block），不给任何请求用",
    "lib's pool holds the tensors as well as the bookkeeping; vLLM keeps the tensors in the worker and only block ids "
    "in the scheduler's pool": "lib 的池既存张量也记账；vLLM 把张量放在 worker 里，调度器的池里只有块 id",
    "tokens per KV block; an attention backend that needs another size may change it when none was given":
        "每个 KV 块的 token 数；没有指定时，需要别的大小的注意力后端可以改它",
    "lib's default is also 16 (PagedKVPool.for_model); the notebooks use 2–4 to make blocks visible":
        "lib 的默认值也是 16（PagedKVPool.for_model）；笔记本里用 2–4，好让块看得见",
    "on the GPU worker, one row of physical block ids per running request, and the slot of every new token":
        "在 GPU worker 上，每个运行中的请求一行物理块 id，外加每个新 token 的槽位",
    "lib keeps one BlockTable object per sequence and builds the tensor per pass (PagedKVPool.table_tensor)":
        "lib 每个序列一个 BlockTable 对象，每次前向传播再拼成张量（PagedKVPool.table_tensor）",
    "paged attention reads the blocks": "分页注意力读取块",
    "the attention backend (FlashAttention, FlashInfer, Triton, …) gets a block_table and reads keys and values "
    "where they lie; all sequences' tokens are laid end to end, no padding":
        "注意力后端（FlashAttention、FlashInfer、Triton 等）拿到 block_table，就地读取键和值；所有序列的 token 首尾相接，没有填充",
    "lib gathers a sequence's blocks into one tensor and runs the model's plain attention on it (same numbers, "
    "easier to read); ragged batches are padded":
        "lib 把一个序列的块收集成一个张量，再对它跑模型的朴素注意力（数值相同，更好读）；长短不一的批次要填充",
    "KV cache manager": "KV 缓存管理器",
    "the scheduler asks it for the blocks a step's new tokens need; it returns None when the pool is short":
        "调度器向它要一步的新 token 所需的块；池里不够时它返回 None",
    "lib raises PoolExhaustedError, and the caller (lib.serving) decides to wait or preempt":
        "lib 抛出 PoolExhaustedError，由调用方（lib.serving）决定等待还是抢占",
    "GPU memory budget": "显存预算",
    "profiles one dummy pass; KV memory = total × utilization − weights − peak activations − memory outside torch − "
    "CUDA graphs": "先跑一次空的前向传播做剖析；KV 显存 = 总量 × 利用率 − 权重 − 激活峰值 − torch 之外的显存 − CUDA graph",
    "kv_capacity computes the weights from the shapes and takes the activation peak, non-torch memory and CUDA "
    "graphs as parameters": "kv_capacity 由形状算出权重，激活峰值、torch 之外的显存和 CUDA graph 作为参数传入",
    "number of KV blocks": "KV 块数",
    "num_blocks = available memory // bytes of one block over all layers": "num_blocks = 可用显存 // 一个块在所有层的字节数",
    "the same division; one block's bytes come from lib.costs.kv_cache_bytes(model, block_size)":
        "同样的除法；一个块的字节数来自 lib.costs.kv_cache_bytes(model, block_size)",
    "bytes of one block": "一个块的字节数",
    "per layer: n_kv_heads × block_size × (head_dim of K + head_dim of V) × bytes per value":
        "每层：n_kv_heads × block_size ×（K 的 head_dim + V 的 head_dim）× 每个值的字节数",
    "the same count, summed over the layers": "同样的计数，再对各层求和",
    "prefix caching": "前缀缓存",
    "full blocks are found again by a hash chained over the blocks before them; on by default; never the last "
    "prompt token (its logits are needed)": "满块靠串联了前面各块的哈希再次找到；默认开启；提示词的最后一个 token 从不复用（要用它的 logits）",
    "lib indexes full blocks by the token tuple itself (no hash, no collision); off unless asked for":
        "lib 直接用 token 元组索引满块（不用哈希，不会冲突）；默认关闭",
    "free list and eviction": "空闲链表与驱逐",
    "a freed block that no hash names is reused first (front of the queue); a cached one goes to the back, so "
    "cached blocks are evicted least recently used first":
        "没有哈希指向的释放块最先复用（放到队首）；有缓存的放到队尾，所以有缓存的块按最近最少使用的顺序驱逐",
    "lib puts every freed block at the back (oldest freed reused first), cached or not":
        "lib 把每个释放的块都放到队尾（最早释放的最先复用），不管有没有缓存",
    "preemption": "抢占",
    "when blocks run out, the last request of the running queue (the most recently admitted, first come first "
    "served) frees all its blocks and goes back to the front of the waiting queue, to be recomputed; there is no "
    "swapping to CPU": "块用完时，运行队列的最后一个请求（最近接纳的，先来先服务）释放它的所有块，回到等待队列的队首，之后重计算；不会换出到 CPU",
    "the same policy (recompute) in the simulation and in serve()": "模拟和 serve() 里是同样的策略（重计算）",
    "watermark": "水位线",
    "a fraction of the blocks kept free when admitting waiting or preempted requests; 0 (off) by default":
        "接纳等待中或被抢占的请求时保持空闲的那部分块；默认为 0（关）",
    "lib.serving.simulate's watermark applies the same way, at admission only": "lib.serving.simulate 的水位线作用相同，只在接纳时起作用",
    "continuous batching": "连续批处理",
    "every step the scheduler picks the running and waiting requests that fit a token budget; None means a "
    "per-platform default (256 on a GPU)": "每一步调度器挑出放得进 token 预算的运行中和等待中的请求；None 表示按平台取默认值（GPU 上为 256）",
    "lib.serving.serve admits whole prompts (no token budget, no chunked prefill) up to max_batch":
        "lib.serving.serve 整段接纳提示词（没有 token 预算，没有分块预填充），最多 max_batch 个",
    "parallel sampling (n > 1)": "并行采样（n > 1）",
    "a request with n samples becomes n independent child requests; they share only full prompt blocks, found by "
    "prefix caching (no copy-on-write of a half-full block)":
        "有 n 个样本的请求变成 n 个独立的子请求；它们只共享提示词的满块（靠前缀缓存找到；半满的块不做写时复制）",
    "lib.generate(num_samples=) prefills once and forks the cache with copy-on-write, as the 2023 paper did":
        "lib.generate(num_samples=) 只预填充一次，再用写时复制分叉缓存，和 2023 年的论文一样",
    "a dict: method (draft model, ngram, EAGLE, MTP, …), model, num_speculative_tokens; off by default":
        "一个 dict：method（草稿模型、ngram、EAGLE、MTP 等）、model、num_speculative_tokens；默认关闭",
    "lib has the draft-model method only, with a separate cache per model": "lib 只有草稿模型这一种方法，每个模型各有自己的缓存",
    "KV cache dtype": "KV 缓存的 dtype",
    "'auto' stores K and V in the model's dtype; 'fp8' (e4m3) or 'fp8_e5m2' halve a 16-bit cache":
        "'auto' 用模型的 dtype 存 K 和 V；'fp8'（e4m3）或 'fp8_e5m2' 让 16 位的缓存减半",
    "lib.costs counts any dtype's bytes; kv_capacity takes the 16-bit and fp8 choices":
        "lib.costs 能算任何 dtype 的字节数；kv_capacity 接受 16 位和 fp8 两种选择",
    "sliding window": "滑动窗口",
    "layers with a window free the blocks that fell out of it (remove_skipped_blocks); a hybrid model keeps a group "
    "of blocks per kind of layer": "有窗口的层释放移出窗口的块（remove_skipped_blocks）；混合模型每种层各有一组块",
    "lib's window (ModelConfig.sliding_window) keeps a ring buffer of the last positions per layer":
        "lib 的窗口（ModelConfig.sliding_window）每层用一个环形缓冲区保存最近的位置",
    "longest sequence": "最长序列",
    "None takes the model's own limit; the KV-cache size in tokens vLLM logs assumes requests this long":
        "None 表示取模型自己的上限；vLLM 日志里以 token 计的 KV 缓存大小假定请求有这么长",
    "lib's ModelConfig.max_seq_len; kv_capacity(max_model_len=) reproduces vLLM's logged token count":
        "lib 的 ModelConfig.max_seq_len；kv_capacity(max_model_len=) 复现 vLLM 日志中的 token 数",
    # -- headers and words of the tables notebooks print with lib.text.text_table --
    "idea": "概念", "in lib": "lib 中", "vLLM file": "vLLM 文件", "vLLM name": "vLLM 名称", "engine argument": "引擎参数",
    "default (0.33.0)": "默认值（0.33.0）", "KV memory": "KV 显存", "KV per token": "每个 token 的 KV",
    "blocks": "块数", "full-length requests": "满长度请求数", "setting": "设置", "block": "块", "defaults": "默认",
    "activation peak 4 GiB": "激活峰值 4 GiB",
    "held-out text": "留出文本", "lm: bits per character": "lm：每字符比特数",
    "characters' frequencies only": "只用字符频率", "a uniform guess": "均匀猜测",
    # -- table headers and words (lib.text.text_table, the roofline, memory, speculative, flash and serving tables) --
    "kept": "保留", "p before": "p 截断前", "yes": "是", "no": "否",
    "scores": "分数", "merged heads": "合并各头", "weight on t - 1": "t - 1 上的权重", "this run": "这次运行",
    "held-out English": "留出的英文", "held-out Chinese": "留出的中文",     "queries": "查询", "largest share on <s>": "<s> 上的最大占比", "layer, head": "层，头", "even attention": "平均注意力",
    "ratio": "比值", "weights read MB": "读取权重 MB", "KV read MB": "读取 KV MB",
    "KV write MB": "写入 KV MB", "bound": "受限于", "time ms": "时间 ms", "weights read B": "读取权重 B",
    "KV read B": "读取 KV B", "KV write B": "写入 KV B", "operator": "算子", "memory": "访存", "compute": "计算",
    "FLOP/byte @B=1": "FLOP/字节 @B=1", "limit B→∞": "极限 B→∞", "ridge": "脊点", "batch to ridge": "到脊点的批次",
    "sequences that fit": "放得下的序列数", "step FLOP/B at that batch": "该批次的整步 FLOP/B",
    "does not start": "无法启动",
    "weights FLOP/B": "权重 FLOP/B", "attention FLOP/B": "注意力 FLOP/B", "step FLOP/B": "整步 FLOP/B",
    "KV read = weights read at batch×ctx": "KV 读取 = 权重读取时的 批次×上下文",
    "size": "大小", "per token": "每个 token", "per request": "每个请求", "fits?": "放得下？",
    "free after weights": "除去权重后的空闲", "KV cache in": "KV 缓存格式", "bytes, lib.costs": "字节，lib.costs",
    "bytes, measured on the tensors": "字节，在张量上实测", "requests that fit on 80 GiB": "80 GiB 上放得下的请求数",
    "runs": "运行次数", "new tokens": "新 token", "target passes": "目标模型前向传播", "saved": "节省",
    "draft passes": "草稿模型前向传播", "drafts kept": "草稿被接受", "tokens/pass": "token/前向传播",
    "full rounds": "完整轮次", "tokens/full round": "token/完整轮次", "predicted": "预测", "p target": "p 目标",
    "q draft": "q 草稿", "keep if proposed": "提议时的接受概率", "output": "输出",
    "kind": "类型", "events": "事件", "policy": "策略", "seconds": "秒", "tokens/s": "token/秒", "ms per pass": "每次前向传播 ms",
    "mean TTFT (ms)": "平均首 token 延迟（ms）", "mean latency (ms)": "平均延迟（ms）", "run": "运行",
    "preemptions": "抢占次数", "forward passes": "前向传播次数", "prefill tokens": "预填充 token",
    "of them recomputed": "其中重算", "blocks to CPU": "换出到 CPU 的块", "blocks from CPU": "从 CPU 换入的块",
    "most blocks on CPU": "CPU 上最多的块数", "bytes moved": "搬运字节数", "tokens %": "token 占比 %",
    "reserved, later %": "预留，之后用 %", "reserved, never %": "预留，从未用 %", "free %": "空闲 %",
    "tokens / allocated %": "token / 已分配 %", "mean batch": "平均批次", "max batch": "最大批次", "steps": "步数",
    "tensor": "张量", "bytes read": "读取字节", "bytes written": "写入字节", "keys": "键", "rescale old sums": "旧和的缩放",
    "acc / l so far": "目前的 acc / l", "chunk": "段", "plain": "朴素", "flash, tiles of 64": "flash，分块 64",
    "held positions": "保存的位置数", "slot of the newest": "最新的槽位", "keys(0) length": "keys(0) 长度",
    "every position": "保留每个位置", "ring": "环形", "model, text": "模型，文本", "even spread": "平均分配",
    "largest share on position 0": "位置 0 上的最大占比", "at": "位于", "cache": "缓存", "perplexity": "困惑度",
    "full cache": "完整缓存", "top-1 same as full": "top-1 与完整缓存相同",
    "extra bits per token from position W on": "从位置 W 起每个 token 多出的比特数", "chat (toy)": "chat（玩具模型）",
    "lm, English": "lm，英文", "lm, Chinese": "lm，中文", "positions": "位置", "window": "窗口",
    "no proposal": "无提议",
    "held-out passages": "留出段落",
    "a passage, then its start again": "一段文字，再从头写", "random letters, then their start again": "随机字母，再从头写",
    "prompt lookup, n = 2..8": "提示词查找，n = 2..8", "draft": "草稿",

    "used shared free  events": "已用 共享 空闲  事件",
    "event code\x04alloc": "分配", "event code\x04share": "共享", "event code\x04cow": "写时复制",
    "event code\x04free": "释放", "event code\x04hit": "命中", "event code\x04evict": "驱逐",
    "layers": "层数", "cached per token per layer": "每层每个 token 缓存的内容", "values": "数值个数",
    "smaller than MHA by": "比 MHA 小", "weights do not fit": "权重放不下", "round": "轮次", "proposed": "提议",
    "emitted": "输出", "new so far": "累计新 token",

    # -- lib.exercises: tiered hints (a question, a pointer; the recipe is the hint above), check()'s and reveal's
    # messages, Exercise 6 of 03 (the preallocated cache in the loop) and its named mistakes --
    "\n  Hint {k} of {m} — {kind}: {hint}":
        "\n  提示 {k}/{m}（{kind}）：{hint}",
    "a question":
        "先想一个问题",
    "a pointer":
        "指个方向",
    "the recipe":
        "具体做法",
    "… {title}: not written yet — replace the `raise NotImplementedError` with your code and run the cell again. Hints come after a wrong try: a question first, the recipe last.":
        "… {title}：还没写——把 `raise NotImplementedError` 换成你的代码，再运行这个单元格。做错一次才给提示：先是一个问题，最后才是具体做法。",
    "your function raised {error}: {e}":
        "你的函数抛出了 {error}：{e}",
    "✗ {title} — case {i} of {n} ({case}): {problem}":
        "✗ {title}——第 {i} 个用例（共 {n} 个；{case}）：{problem}",
    "✗ {title}, the worked solution — case {i} of {n} ({case}): {problem}":
        "✗ {title}，参考解答——第 {i} 个用例（共 {n} 个；{case}）：{problem}",
    "✓ {title}: the worked solution passes the hidden case. Yours is checked, and marked done, when you run your own cell above.":
        "✓ {title}：参考解答通过了隐藏用例。你自己的解答要在运行上面你的单元格时才检查，通过了才算完成。",
    "✓ {title}: the worked solution passes all {n} hidden cases. Yours is checked, and marked done, when you run your own cell above.":
        "✓ {title}：参考解答通过了全部 {n} 个隐藏用例。你自己的解答要在运行上面你的单元格时才检查，通过了才算完成。",
    "No prediction yet: write your guess in the cell above and run it, then run this cell again.":
        "还没有预测：先在上面的单元格里写下你的猜测并运行，再运行这一格。",
    "I skipped it: show the answer":
        "我跳过了预测：显示答案",
    "Your preallocated KV cache in your greedy loop, on the real model":
        "在你自己的贪心循环里用你自己的预分配 KV 缓存，跑真实模型",
    "the prefill (step 0) fed {n} tokens: it feeds the whole prompt, {m} tokens here":
        "预填充（第 0 步）输入了 {n} 个 token：预填充要输入整段提示词，这里是 {m} 个",
    "step {s} fed {k} tokens, {text}: with a cache, a decode step feeds only the newest token (the cache holds the {q} before it already)":
        "第 {s} 步输入了 {k} 个 token，{text}：有了缓存，每步解码只输入最新的一个 token（它前面的 {q} 个已经在缓存里）",
    "the argmax of the logits step {p} returned":
        "即第 {p} 步返回的 logits 的 argmax",
    "step {s} fed {tok}, which is not {newest}":
        "第 {s} 步输入的是 {tok}，不是{newest}",
    "step {s} fed {tok}, a stale token ({was}): feed the newest token, {newest}":
        "第 {s} 步输入的 {tok} 是个过时的 token（{was}）：要输入最新的 token，{newest}",
    "the {nth} new token":
        "{nth}新 token",
    "from the prompt":
        "来自提示词",
    "step {s}, layer {layer}":
        "第 {s} 步第 {layer} 层",
    "at {what} your _write returned {got}: it returns (every key so far, every value so far), each (1, n_kv_heads, positions, head_dim)":
        "在{what}，你的 _write 返回的是 {got}：它应返回（到此为止的全部键，到此为止的全部值），形状都是 (1, n_kv_heads, positions, head_dim)",
    "at {what} the keys your _write handed back do not hold the key it was given: write k into the buffer before you hand it back":
        "在{what}，你的 _write 返回的键里没有传给它的那个键：先把 k 写进缓冲区，再返回",
    "at {what} your _write wrote position {p} where {q} was expected: it wrote over a cached position instead of appending after the {q} cached ones, from the offset seq_len on":
        "在{what}，你的 _write 写到了位置 {p}，应该是位置 {q}：它覆盖了一个已缓存的位置，而不是从偏移 seq_len 起接在已缓存的 {q} 个位置后面",
    "at {what} your _write wrote position {p} where {q} was expected: a pass writes its T positions from the offset seq_len on, the same offset in every layer":
        "在{what}，你的 _write 写到了位置 {p}，应该是位置 {q}：一次前向传播的 T 个位置从偏移 seq_len 起写入，每一层的偏移都相同",
    "at {what} your _write handed back {n} keys where {m} were expected: the new query attends over every position so far, the prompt's and the new ones":
        "在{what}，你的 _write 返回了 {n} 个键，应该是 {m} 个：新的查询要关注到此为止的每个位置，提示词的和新生成的都算",
    "after step {s} seq_len is still {q}: the offset never advanced; commit() must move it on by the {T} position(s) this pass wrote":
        "第 {s} 步之后 seq_len 仍是 {q}：偏移一直没有前移；commit() 要把它往前移 {T} 个位置，即这次前向传播写入的位置数",
    "after step {s} seq_len is {n} where {m} was expected: commit() moves the offset on by the positions this pass wrote, once (not once per layer)":
        "第 {s} 步之后 seq_len 是 {n}，应该是 {m}：commit() 把偏移往前移这次前向传播写入的位置数，只移一次（不是每层移一次）",
    "your {nth} new token is {got}: the new tokens are token ids, ints":
        "你的{nth}新 token 是{got}：新 token 应是 token id，即 int",
    "your {nth} new token is {tok}, which is not the greedy choice there{right}":
        "你的{nth}新 token 是 {tok}，不是那里的贪心选择{right}",
    "; the {k} before it are right":
        "；它前面的 {k} 个都对",
    "{mistake} (then it raised {error})":
        "{mistake}（随后抛出了 {error}）",
    "Where in the preallocated buffers do a pass's T new keys and values go, and what must move on once every layer has written them?":
        "一次前向传播新来的 T 个键和值，该写到预分配缓冲区的哪里？每一层都写完之后，什么要往前移？",
    "seq_len is the offset: the next write starts there, and it is also the position of the next fed token. _write fills positions seq_len .. seq_len + T - 1 in place and hands back everything up to there; commit() moves seq_len on by T. The loop feeds the prompt once, then only the newest token.":
        "seq_len 就是偏移：下一次写入从这里开始，它也是下一个输入 token 的位置。_write 原地写入位置 seq_len .. seq_len + T - 1，并返回到此为止的全部键和值；commit() 把 seq_len 往前移 T。循环先输入一次提示词，之后每步只输入最新的 token。",
    "In _write: end = self.seq_len + k.shape[2]; self.k[layer][:, :, self.seq_len:end] = k (the same for v); return self.k[layer][:, :, :end], self.v[layer][:, :, :end]. In commit: self.seq_len += self._pending (T), then self._pending = 0. The loop: one cache of len(prompt) + n_new positions, logits = model(prompt, cache=cache), then n_new times the argmax of logits[0, -1], fed alone.":
        "在 _write 里：end = self.seq_len + k.shape[2]；self.k[layer][:, :, self.seq_len:end] = k（v 同理）；返回 self.k[layer][:, :, :end], self.v[layer][:, :, :end]。在 commit 里：self.seq_len += self._pending（即 T），再令 self._pending = 0。循环：建一个能放 len(prompt) + n_new 个位置的缓存，logits = model(prompt, cache=cache)，之后重复 n_new 次：取 logits[0, -1] 的 argmax，单独输入。",
    "Which keys may the query at position i see, and what must happen to a score before softmax so that the other keys get weight 0?":
        "位置 i 的查询可以看哪些键？要让其余的键权重为 0，softmax 之前分数要怎样处理？",
    "The scores are q @ kᵀ times 1/√hd; the mask is a triangle (torch.triu), and masked_fill puts -inf where a query must not look.":
        "分数是 q @ kᵀ 再乘以 1/√hd；掩码是一个三角形（torch.triu），用 masked_fill 在查询不该看的地方填 -inf。",
    "Which position's logits predict the next token, and when should the loop stop before max_new_tokens?":
        "哪个位置的 logits 预测下一个 token？在生成满 max_new_tokens 之前，循环什么时候该停？",
    "model(torch.tensor([ids])) gives logits (1, T, vocab): the last row, [0, -1], is the next token's, and its argmax is the greedy choice. eos_id ends the loop right after it is appended.":
        "model(torch.tensor([ids])) 返回形状为 (1, T, vocab) 的 logits：最后一行 [0, -1] 对应下一个 token，它的 argmax 就是贪心的选择。追加了 eos_id 之后立即结束循环。",
    "At which position does the new token sit when seq_len tokens are cached already, and is its key rotated before it is stored?":
        "已经缓存了 seq_len 个 token 时，新 token 在哪个位置？它的键存进缓存之前要不要先旋转？",
    "Its position is seq_len: rope_tables gives cos and sin for that position and apply_rope turns the key; both work on 4-D tensors (B, heads, T, hd), so add the missing dimensions and take them off again.":
        "它的位置就是 seq_len：rope_tables 给出这个位置的 cos 和 sin，apply_rope 旋转键；两者都处理 4 维张量 (B, heads, T, hd)，所以先补上缺的维度，算完再去掉。",
    "How much does each cached key count for this one query, and how do those amounts combine the values into one output?":
        "对这一个查询来说，每个缓存的键各占多少分量？这些分量怎样把各个值合成一个输出？",
    "One score per key (a dot product, divided by √hd); softmax makes the scores weights that sum to 1; the output is the weighted sum of the values.":
        "每个键一个分数（点积，再除以 √hd）；softmax 把分数变成总和为 1 的权重；输出是值的加权和。",
    "Each half was normalised against its own maximum: what must change in l and acc before two halves measured against different maxima can be added?":
        "每一半都是相对自己的最大值算的：两半的最大值不同，相加之前 l 和 acc 要怎样调整？",
    "Take the larger maximum as the common one: a side's terms were exp(s - its m), so multiplying them by exp(its m - m) restates them against the common m (online softmax's rescaling).":
        "取较大的最大值作为共同的 m：一边的各项原来是 exp(s - 该边的 m)，乘以 exp(该边的 m - m) 就换算成相对共同 m 的值（在线 softmax 的重新缩放）。",
    "One pass of the target over [pending, *drafts] gives its choice after every prefix: which drafts does it confirm, and which positions must the cache forget afterwards?":
        "目标模型对 [pending, *drafts] 做一次前向传播，就得到它在每个前缀之后的选择：它确认了哪些草稿？之后缓存要忘掉哪些位置？",
    "Compare drafts[i] with the argmax of row i of the logits and stop at the first mismatch. The pass wrote 1 + len(drafts) positions; cache.crop keeps only the pending token and the kept drafts.":
        "把 drafts[i] 与 logits 第 i 行的 argmax 比较，遇到第一个不同就停。这次前向传播写入了 1 + len(drafts) 个位置；用 cache.crop 只留下 pending 和被保留的草稿。",
    "The pool holds the blocks in the order they were handed out: which list gives this sequence's order, and how full is its last block?":
        "池里的块按分配的先后排放：哪个列表给出这个序列的块顺序？它的最后一块装满了没有？",
    "Index the pool with the block table to get the blocks in order; the heads must come before the blocks so that reshape lays each head's positions end to end; n_tokens says where to cut.":
        "用块表索引池子，得到按顺序排列的块；要先把头挪到块的前面，reshape 才会把每个头的各个位置首尾相接；n_tokens 决定在哪里截断。",
    "Which logical block holds the position, and where inside that block is it?":
        "这个位置落在哪个逻辑块里？在那个块里又是第几个槽位？",
    "Integer division and remainder by block_size split a position into (logical block, offset); the table maps the logical block to a physical one.":
        "用 block_size 做整除和取余，把位置拆成（逻辑块，偏移）；块表把逻辑块映射到物理块。",
    "Does a block that holds only a few of the tokens still count as a block?":
        "只装了几个 token 的块，算不算一整块？",
    "Blocks are handed out whole: the count is the length over the block size, rounded up (-(-n // b) or math.ceil); the slots of those blocks that hold no token are the empty ones.":
        "块按整块分配：块数是长度除以块大小再向上取整（-(-n // b) 或 math.ceil）；这些块里没放 token 的槽位就是空槽位。",
    "Within one step, who goes first: the queue waiting to be admitted, or the requests already running? And what happens when a running request needs a block and none is free?":
        "一步之内谁先来：等待接纳的队列，还是已经在运行的请求？运行中的请求需要新块而没有空闲块时怎么办？",
    "Admission is first come first served and stops at the first request that does not fit; a running request needs a new block exactly when its length is a multiple of block_size; preemption takes the last request of the running list.":
        "接纳按先来先服务，遇到第一个放不下的请求就停；运行中的请求恰好在长度是 block_size 的倍数时需要新块；抢占的是运行列表中的最后一个请求。",
    "Which number of a vector must land exactly on ±127, and what happens to a vector that is all zeros?":
        "一个向量里哪个数要正好落在 ±127 上？全零的向量又会怎样？",
    "One scale per vector: the largest absolute value over the last dimension divided by 127 (amax with keepdim=True keeps it broadcastable); then round and cast; keep the scale away from 0.":
        "每个向量一个 scale：最后一维上的最大绝对值除以 127（amax 配合 keepdim=True，便于广播）；然后取整并转换类型；scale 不能是 0。",
    "What does the cache store for one token in one layer, and how many numbers is that?":
        "一个 token 在一层里，缓存存了什么？一共是多少个数？",
    "Per token and layer: a key and a value for every KV head (n_kv_heads, not n_heads: GQA shares them), head_dim numbers each; then multiply by the bytes of one number, the tokens and the batch.":
        "每个 token、每层：每个 KV 头一个键和一个值（是 n_kv_heads 不是 n_heads：GQA 让几个查询头共用），各有 head_dim 个数；再乘以每个数的字节数、token 数和批次大小。",
    "For a batch of B sequences, what grows with B: the FLOPs, the bytes of weights read, or both?":
        "批次里有 B 个序列时，随 B 增长的是 FLOPs、读取的权重字节，还是两者都是？",
    "Every weight does one multiply-add (2 FLOPs) per sequence, but it is read from memory once for the whole batch; intensity = FLOPs / bytes, compared with peak / bandwidth.":
        "每个权重对每个序列做一次乘加（2 FLOPs），但整个批次只从内存读一次；强度 = FLOPs / 字节，再与 峰值 / 带宽 比较。",
    "When the draft likes a token more than the target does, how often may that token be kept so that what comes out follows the target's distribution?":
        "草稿模型比目标模型更看好某个 token 时，这个 token 该以多大概率被接受，最终输出才服从目标模型的分布？",
    "Accept the proposed token with probability min(1, p/q); a rejection must make up exactly the probability the acceptances left out: the positive part of p - q, normalised.":
        "以概率 min(1, p/q) 接受提议的 token；被拒绝时，要恰好补上接受时少掉的那部分概率：p - q 的正部，再归一化。",
    "How likely is it that the first i proposals are all kept, and how many tokens does the target add of its own every round?":
        "前 i 个提议全部被接受的概率是多少？每一轮目标模型自己又补上几个 token？",
    "Add up, over i, the probability that the first i proposals are kept (a geometric series), plus the one token the target always adds; at α = 1 the series' closed form divides by zero.":
        "对 i 求和“前 i 个提议都被接受”的概率（一个等比数列），再加上目标模型总会补上的那一个 token；α = 1 时等比数列的求和公式会除以零。",
    "How much of the GPU's memory may vLLM use, and what is already taken before the KV cache gets the rest?":
        "GPU 显存中 vLLM 能用多少？KV 缓存拿到剩下的之前，哪些已经被占用？",
    "The budget is total × gpu_memory_utilization (rounded up); the weights and the activation peak come off it; one block holds the keys and values of block_size tokens in every layer.":
        "预算是 总量 × gpu_memory_utilization（向上取整）；从中减去权重和激活峰值；一个块存每层 block_size 个 token 的键和值。",
    "Once the window is full, whose slot does a new position take over, and which slots are never taken over when there are sinks?":
        "窗口满了之后，新位置占用的是谁的槽位？有汇点时，哪些槽位永远不会被占用？",
    "A ring counts positions modulo its size; with sinks, the first `sinks` slots stay put and only the other window - sinks slots form the ring, counted from the position after the sinks.":
        "环形缓冲区按自身大小取模计数；有汇点时，前 `sinks` 个槽位固定不动，只有其余 window - sinks 个槽位组成环，从汇点之后的位置开始计数。",
    "Which keys may a query at position p see: how far back, and how far ahead?":
        "位置 p 的查询能看到哪些键：往前能看多远，往后又能看多远？",
    "Two conditions on positions (not on indices into the tensors): causal, and within the last `window` positions; the queries' and the keys' positions are given, so compare them by broadcasting.":
        "对位置（不是张量下标）的两个条件：因果，以及在最近 `window` 个位置之内；查询和键的位置都已给出，用广播比较即可。",
    # -- the new build-its: a paged write and the prefix-cache lookup (09), FlashAttention's tiled loop (11) --
    "FlashAttention's loop: the online softmax over tiles of keys":
        "FlashAttention 的循环：按键的分块做在线 softmax",
    "You see the keys one tile at a time and never all the scores at once: what must you keep per query row so that the softmax comes out exact at the end?":
        "键一次只来一个分块，你从来看不到全部分数：每一行查询要记下什么，最后的 softmax 才是精确的？",
    "Keep three things per row: the running maximum m, the sum l of exp(score − m) and the weighted sum acc of the values; a tile that raises m changes the reference point of everything summed before it. Divide acc by l at the end.":
        "每一行记三样东西：到目前为止的最大值 m、exp(score − m) 之和 l、值的加权和 acc；某个分块抬高了 m，之前累加的一切的基准就变了。最后用 acc 除以 l。",
    "start with m = -inf, l = 0, acc = 0; for each tile: s = q @ k_tileᵀ / √D; m_new = max(m, s.max(-1)); r = exp(m − m_new); p = exp(s − m_new[:, None]); l = r·l + p.sum(-1); acc = r[:, None]·acc + p @ v_tile; m = m_new; keep m. Return (acc / l[:, None], the list of m).":
        "开始时 m = -inf，l = 0，acc = 0；对每个分块：s = q @ k_tileᵀ / √D；m_new = max(m, s.max(-1))；r = exp(m − m_new)；p = exp(s − m_new[:, None])；l = r·l + p.sum(-1)；acc = r[:, None]·acc + p @ v_tile；m = m_new；记下 m。返回 (acc / l[:, None], 各个 m 组成的列表)。",
    "{Tq} query rows, {Tk} keys of head_dim {D} in tiles of {tile}: {what}":
        "{Tq} 行查询，{Tk} 个 head_dim 为 {D} 的键，每个分块 {tile} 个：{what}",
    "the last tile holds only 2 keys":
        "最后一个分块只有 2 个键",
    "a later tile holds each row's largest score":
        "每一行的最大分数都在较后的分块里",
    "float32 scores in the hundreds: exp of a score alone overflows":
        "float32 的分数上百：单独对分数取 exp 会溢出",
    "one tile holds every key":
        "一个分块就装下了全部键",
    "you returned {n} running maxima for {m} tiles of {tile} keys (the last tile holds {r}): one maximum after each tile":
        "你返回了 {n} 个最大值，但有 {m} 个分块（每块 {tile} 个键，最后一块 {r} 个）：每个分块之后记一个最大值",
    "the running maximum after the {nth} tile":
        "{nth}分块之后的最大值",
    "{problem}: it is the larger of the maximum so far and this tile's largest score (the scores scaled by 1/√D)":
        "{problem}：它是到目前为止的最大值与这个分块最大分数中较大的那个（分数要乘以 1/√D）",
    "your output holds NaN or inf: exp of a score this large overflows; take exp of the score minus the running maximum":
        "你的输出里有 NaN 或 inf：这么大的分数取 exp 会溢出；要对分数减去当前最大值之后再取 exp",
    "the running maxima are right but the output is off: when a tile raises the maximum, the l and acc summed so far must shrink by exp(m_old − m_new) before the tile's terms are added":
        "最大值都对，但输出有偏差：某个分块抬高了最大值时，之前累加的 l 和 acc 要先乘以 exp(m_old − m_new) 缩小，再加上这个分块的项",
    "your output":
        "你的输出",
    "Write a pass's keys into the pool through the slot mapping":
        "按槽位映射把一次前向传播的键写进池子",
    "The new tokens sit at positions start, start + 1, …: which physical block and which slot in it does each one go to?":
        "新 token 的位置是 start、start + 1、……：每一个该写进哪个物理块、块里的哪个槽位？",
    "A position's logical block is position // block_size and its offset position % block_size; the block table turns the logical block into a physical one of the pool (vLLM's slot_mapping is the same pair, flattened).":
        "一个位置的逻辑块是 position // block_size，偏移是 position % block_size；块表把逻辑块换成池中的物理块（vLLM 的 slot_mapping 就是把这一对展平成一个数）。",
    "for each i in range(T): p = start + i; pool_k[block_table[p // block_size], :, p % block_size] = k_new[:, i]; then return pool_k (block_size is pool_k.shape[2]).":
        "对 range(T) 中的每个 i：p = start + i；pool_k[block_table[p // block_size], :, p % block_size] = k_new[:, i]；最后返回 pool_k（block_size 就是 pool_k.shape[2]）。",
    "{what}: block table {table}, blocks of 4, a pool of 12 blocks":
        "{what}：块表 {table}，块大小 4，池中 12 个块",
    "a prefill of 7 tokens into blocks that are not in order":
        "预填充 7 个 token，写进不按顺序排列的块",
    "3 tokens from position 6, across a block boundary":
        "从位置 6 起的 3 个 token，跨过块边界",
    "one decode token at the first slot of a new block":
        "一个解码 token，落在新块的第一个槽位",
    "2 tokens in the middle of a block":
        "块中间的 2 个 token",
    "the pool your write returns":
        "你的写入返回的池子",
    "position {p} (the {nth} new token) is nowhere in the pool your write returns: write k_new[:, {i}] into its slot":
        "位置 {p}（{nth}新 token）在你返回的池子里哪儿都找不到：把 k_new[:, {i}] 写进它的槽位",
    "your write put position {p} in block {b}, which is its logical block number (position // block_size): look that entry up in the block table for the physical block":
        "你把位置 {p} 写进了块 {b}，这是它的逻辑块号（position // block_size）：要用它去查块表，得到物理块",
    "your write put position {p} at offset {o} of block {b}: the offset inside a block is the position % block_size, counted from the block's first slot, not from the first new token":
        "你把位置 {p} 写在了块 {b} 的偏移 {o} 处：块内偏移是 position % block_size，从块的第一个槽位数起，不是从第一个新 token 数起",
    "your write put position {p} (the {nth} new token) in block {b}, at offset {o}: the block table sends it elsewhere":
        "你把位置 {p}（{nth}新 token）写进了块 {b} 的偏移 {o} 处：按块表，它应该在别处",
    "your write changed block {b}, offset {o}, a slot no new token belongs to: a write touches only the new tokens' slots (other sequences' keys live in the same pool)":
        "你的写入改动了块 {b} 的偏移 {o}，这个槽位不属于任何新 token：写入只应改动新 token 的槽位（别的序列的键也在同一个池子里）",
    "Look a new request's prefix up in the prefix cache":
        "在前缀缓存里查新请求的前缀",
    "Which of the new request's blocks could an earlier request have computed already, and what must be true of every token before such a block?":
        "新请求的哪些块可能已经被之前的请求算过？这样的块之前的每个 token 又必须满足什么？",
    "A block is reused when the index holds the prefix up to its end (index maps a tuple of token ids to a block); walk the full blocks in order, stop at the first miss, and never reuse the block of the last token: its logits still have to be computed.":
        "索引里有到某个块末尾为止的整个前缀，这个块就能复用（index 把 token id 组成的 tuple 映射到块）；按顺序走过各个满块，遇到第一个查不到的就停；最后一个 token 所在的块永远不复用：它的 logits 还得算。",
    "for i in range((len(token_ids) - 1) // block_size): look up index.get(tuple(token_ids[:(i + 1) * block_size])); stop at the first None, else append the block; return the list.":
        "对 range((len(token_ids) - 1) // block_size) 中的每个 i：查 index.get(tuple(token_ids[:(i + 1) * block_size]))；遇到第一个 None 就停，否则把块追加到列表；返回这个列表。",
    "a prompt of {n} tokens that {what} (blocks of 4)":
        "{n} 个 token 的提示词，{what}（块大小 4）",
    "shares its first blocks with an earlier request":
        "开头几个块和之前的某个请求相同",
    "is an earlier prompt's first 28 tokens: its last block is full and cached":
        "是之前某个提示词的前 28 个 token：最后一块是满的，而且在缓存里",
    "holds an earlier request's tokens after a different start":
        "含有之前某个请求的 token，但开头不同",
    "is an earlier prompt whose 3rd block was evicted since":
        "是之前的某个提示词，它的第 3 个块后来被驱逐了",
    "shares nothing with the cache":
        "和缓存里的内容毫无共同之处",
    "the blocks your lookup reuses are {got}; a list of block ids (ints) was expected":
        "你查到要复用的块是{got}；应为块 id（int）的列表",
    "your lookup reused the block that holds the last token: the model must still compute that token's logits, so the lookup stops one block short when the prompt fills its last block":
        "你复用了最后一个 token 所在的块：模型还得算出这个 token 的 logits，所以提示词正好填满最后一块时，查找要少走一块",
    "your lookup keyed block {i} by its own tokens: a block's key is the whole prefix up to its end (every token before it too), so the same tokens after a different start do not match":
        "你用块 {i} 自己的 token 去查：一个块的键是到它末尾为止的整个前缀（它前面的每个 token 都算），所以开头不同时，同样的 token 也对不上",
    "your lookup went on after the first block the index does not hold: the {nth} block misses, so the reused prefix ends before it":
        "索引里第一次查不到之后，你的查找还在继续：{nth}块查不到，复用的前缀就到它之前为止",
    "your lookup reuses {n} block(s), {got}, which is not the cached prefix":
        "你的查找复用了 {n} 个块 {got}，这不是缓存里的前缀",
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
        "再除以一个块的字节数：每层 block_size 个 token 的键和值（×2）。只保留整块（//）；什么都不剩时一块也没有。",
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
    # lib.exercises.reveal: a prediction's answer cell
    "the answer": "答案",
    "✓ Right.": "✓ 对了。",
    "✓ Right, within {pct}.": "✓ 对了，误差在 {pct} 以内。",
    "✗ Not quite: you said {yours}.": "✗ 不太对：你填的是 {yours}。",
}

# The lines a notebook cell prints with an f-string, as templates: ``{0}``, ``{1:>12,}`` ... stand for the
# values in the order the English writes them (a format spec is only a reminder: the matched text is already
# formatted); the Chinese places them with ``{0}``, ``{1}`` .... ``lib.notebook.setup(lang="zh")`` makes
# ``print`` look every printed line up here (``translate_printed``), so the code cells stay the same in both
# editions. A value that is itself a whole text of this table or of ``ZH`` (``right``, ``decode``) is translated
# too. A line that matches nothing is printed as it is.
ZH_PRINTED: dict[str, str] = {
    # -- lines printed by this round's cells (07's times and watermark, 08's attention regimes) --
    "steps to serve all 400:      max {0:,}, paged {1:,} ({2:.1f}x fewer)":
        "服务完全部 400 个所需步数：  max {0}，分页 {1}（max 是分页的 {2} 倍）",
    "time on an H100, llama-2-13b: max {0:.1f} s, paged {1:.1f} s ({2:.1f}x less), prefills and recomputation charged":
        "在 H100 上跑 llama-2-13b 的时间：max {0} 秒，分页 {1} 秒（max 用时是分页的 {2} 倍），预填充和重计算都已计入",
    "GQA, {0} sequences share a {1}-token prompt": "GQA，{0} 个序列共用一段 {1} token 的提示词",
    "GQA, speculative verify of k={0}": "GQA，投机解码验证 k={0}",
    # -- templates of table cells --
    "head {0}": "头 {0}", "layer {0}, head {1}": "第 {0} 层，第 {1} 头", "window {0} only": "仅窗口 {0}",
    "window {0} + {1} sinks": "窗口 {0} + {1} 个汇点", "window {0} + 1 sink": "窗口 {0} + 1 个汇点", "window {0}": "窗口 {0}",
    "alloc {0}": "分配 {0}", "free {0}": "释放 {0}", "share {0}": "共享 {0}", "hit {0}": "命中 {0}", "cow {0}": "写时复制 {0}",
    "{0} (correction)": "{0}（修正）", "{0} (bonus)": "{0}（额外）",
    "- (text ended at <eos>)": "-（文本在 <eos> 处结束）", "flash, {0}": "flash，{0}", "plain / flash {0}": "朴素 / flash {0}",
    "recompute, prefix cache {0}": "重计算，前缀缓存{0}", "swap, prefix cache {0}": "换出，前缀缓存{0}",
    "{0} ({1} runs)": "{0}（{1} 次运行）", "{0} ms ({1}–{2} ms, {3} runs)": "{0} ms（{1}–{2} ms，{3} 次运行）",
    "{0} bytes moved ({1})": "搬运 {0} 字节（{1}）",
    "greedy, Chinese poems:": "贪心，中文诗：", "greedy, English passages:": "贪心，英文段落：",
    "temperature 1, Chinese poems:": "温度 1，中文诗：", "temperature 1, English passages:": "温度 1，英文段落：",
    "K,V x {0} of {1} heads x {2}": "K,V × {1} 个头中的 {0} 个 × {2}", "latent {0} + rope key {1}": "潜在向量 {0} + rope 键 {1}",
    "bytes ({0})": "字节（{0}）", "requests of {0} tokens that fit": "放得下的 {0} token 请求数",
    "{0} in {1}: {2} parameters; {3} request(s) x {4} tokens": "{0}（{1}）：{2} 个参数；{3} 个请求 × {4} 个 token",
    "  weights in memory      {0}": "  显存中的权重          {0}",
    "  KV cache per token     {0}": "  每个 token 的 KV 缓存 {0}",
    "  KV cache               {0}   ({1} of the total)": "  KV 缓存                {0}   （占总量的 {1}）",
    "  total                  {0}": "  总计                   {0}",
    "  KV cache memory = weight memory at batch x context = {0} tokens (at batch {1}: {2} tokens per request)":
        "  KV 缓存显存 = 权重显存：批次 × 上下文 = {0} 个 token（批次 {1} 时每个请求 {2} 个 token）",
    "{0} new tokens in {1} target passes (generate: {2}) + {3} draft passes; {4}/{5} proposals kept ({6}), {7} "
    "tokens per target pass": "目标模型 {1} 次前向传播生成 {0} 个新 token（单用 generate 要 {2} 次）+ 草稿模型 {3} 次前向传播；"
                              "{5} 个提议中 {4} 个被接受（{6}），目标模型每次前向传播 {7} 个 token",
    # -- Markdown tables a cell displays (03): each cell of a row is looked up --
    "without KV cache: recompute + compute": "无 KV 缓存：重算 + 计算", "K/V computed": "计算的 K/V",
    "with KV cache: compute, read": "有 KV 缓存：计算、读取", "computed": "计算", "read": "读取",
    "recompute {0} + compute {1}": "重算 {0} + 计算 {1}", "compute {0}": "计算 {0}", "compute {0}, read {1}": "计算 {0}，读取 {1}",
    "compute {0}, store it": "计算 {0}，存入缓存", "total, per layer": "合计，每层", "total, all {0} layers": "合计，全部 {0} 层",
    "n tokens": "n 个 token", "K/V computed without cache": "无缓存时计算的 K/V", "ratio": "比值",
    "with cache: projections": "有缓存：投影", "without: projections": "无缓存：投影",
    "bytes copied by torch.cat (counted)": "torch.cat 复制的字节数（计数）", "n(n+1)/2 × per token": "n(n+1)/2 × 每个 token",
    "bytes written in place (static)": "原地写入的字节数（静态）", "static cache size": "静态缓存大小",
    "allocations (cat)": "分配次数（cat）",
    # -- single words of table cells --
    "never": "永不", "static": "静态", "continuous": "连续", "swap": "换出", "paged": "分页", "layer {0}": "第 {0} 层",
    "{0}: {1} layers, d_model {2}, {3} query heads / {4} KV heads ({5}), head_dim {6}, d_ff {7} {8}, {9} positions; "
    "{10} params, KV cache {11}/token in {12}": "{0}：{1} 层，d_model {2}，{3} 个查询头 / {4} 个 KV 头（{5}），head_dim {6}，"
                                               "d_ff {7} {8}，{9} 位置编码；{10} 个参数，KV 缓存每个 token {11}（{12}）",
    "{0} max |logit difference| from the right offset: below 1e-4, the same logits":
        "{0} 与正确偏移相比 max |logit 差|：低于 1e-4，logits 相同",
    "{0} max |logit difference| from the right offset: {1}, different logits": "{0} 与正确偏移相比 max |logit 差|：{1}，logits 不同",
    "every position shifted by +10": "所有位置都偏移 +10", "能 rotated at position 0, not 4": "能 按位置 0 旋转（应为 4）",
    "能 rotated at position 5, not 4": "能 按位置 5 旋转（应为 4）",
    "{0} query heads, {1} K/V heads ({2}): {3}  cache {4} bytes, keys of a layer {5}":
        "{0} 个查询头，{1} 个 K/V 头（{2}）：{3}  缓存 {4} 字节，一层的键 {5}",
    "weights in memory ({0})": "显存中的权重（{0}）", "KV memory = weight memory at tokens": "KV 显存 = 权重显存时的 token 数",
    "per request at {0}": "批次 {0} 时每个请求", "perplexity, {0} cache": "困惑度，{0} 缓存",
    "int8 cache": "int8 缓存", "fp32 cache": "fp32 缓存", "change": "变化", "positions whose top-1 differs": "top-1 不同的位置",
    "under 0.05%": "不到 0.05%", "under 0.5%": "不到 0.5%",
    "static cache, greedy": "静态缓存，贪心", "static cache, sampled": "静态缓存，采样", "concat cache, greedy": "拼接缓存，贪心",
    "concat cache, sampled": "拼接缓存，采样",
    "hand-made cache: {0} ({1} of {2} rows filled in each of {3} layers)": "手写缓存：{0}（{3} 层中每层 {2} 行已填 {1} 行）",
    # -- figures a notebook cell draws (titles, axes, legends), matched as whole texts --
    "the real model, next token after {0}: four ways to choose": "真实模型在 {0} 之后的下一个 token：四种选法",
    "one parallel pass over {0} positions": "对 {0} 个位置的一次并行前向传播",
    "ms ({0} time)": "毫秒（{0} 时间）", "wall": "墙钟",
    "{0}: {1} K/V computed per layer": "{0}：每层计算 {1} 个 K/V",
    "position (token)": "位置（token）",
    "output (hatched)": "输出（斜线）", "tokens (characters of held-out text)": "token（留出文本的字符）",
    "% of the KV budget (server full)": "占 KV 预算的 %（服务器满载）", "requests in the batch": "批次中的请求数",
    "forward pass": "前向传播", "sequences in the pass": "本次前向传播中的序列数",
    "the same {0} requests: static batches drain, continuous batching refills every step":
        "同样的 {0} 个请求：静态批次越跑越空，连续批处理每步都补满",
    "empty slots, final lengths": "空槽位，按最终长度", "empty slots, simulated server (full)": "空槽位，模拟的服务器（满载）",
    "block size (positions)": "块大小（位置数）", "% of the slots held": "占所持槽位的 %", "vLLM's default: 16": "vLLM 的默认值：16",
    "block-table entries per sequence": "每个序列的块表项数", "table entries per sequence": "每个序列的表项数",
    "F: computed, M: computed with the mask (hatched), ·: skipped": "F：计算，M：带掩码计算（斜线），·：跳过",
    "plain (S and P through HBM)": "朴素（S 和 P 经过 HBM）", "flash, tiles of {0}": "flash，分块 {0}",
    "the window above: {0} tokens, tiles of 64": "上面的窗口：{0} 个 token，分块大小 64",
    "the same {0} tokens, tiles of 32": "同样的 {0} 个 token，分块大小 32",
    # figure titles and legend entries that the notebooks' own plotting cells write
    "first token after <s>, top-k = 3": "<s> 之后的第一个 token，top-k = 3",
    "next token after {0}": "{0} 之后的下一个 token",
    "greedy: all mass on the argmax ({0} kept)": "贪心：全部概率给 argmax（保留 {0} 个）",
    "T=0.5: sharper ({0} kept)": "T=0.5：分布更尖（保留 {0} 个）",
    "top-k=3: the 3 largest logits ({0} kept)": "top-k=3：最大的 3 个 logit（保留 {0} 个）",
    "top-p=0.6: the smallest set reaching 0.6 ({0} kept)": "top-p=0.6：累计概率达到 0.6 的最小集合（保留 {0} 个）",
    "position and token": "位置与 token",
    "holds tokens": "存着 token", "reserved, filled later": "已预留，之后填入", "reserved, never filled": "已预留，从未填入",
    "causal": "因果", "sliding window W = {0}": "滑动窗口 W = {0}",
    "lm on held-out text": "lm，留出文本", "chat (toy) on its own run": "chat（玩具模型），它自己生成的文本",
    "{0}, window {1} only": "{0}，仅窗口 {1}", "{0}, window {1} + {2} sinks": "{0}，窗口 {1} + {2} 个汇点",
    # lines the measure of English-only output lines still found
    "{0}(B, T, d_model): the residual stream starts here": "{0}(B, T, d_model)：残差流从这里开始",
    "{0}(B, T, d_model): layer 0's output": "{0}(B, T, d_model)：第 0 层的输出",
    "{0}(B, H, T query, T key)": "{0}(B, H, T 查询, T 键)",
    "merged heads{0}": "合并各头    {0}",
    "KV cache, 32 requests x {0} tokens": "KV 缓存，32 个请求 × {0} 个 token",
    "(measured: best of {0} fp32 matmuls (peak) and tensor sums (read bandwidth) on {1})":
        "（实测：{0} 次 fp32 矩阵乘法（峰值）与张量求和（读带宽）中最快的一次，设备 {1}）",
    "{0} ({1}, n_rep {2}): ceiling at context 2k / 32k / 1M = {3} FLOP/byte  ->  n_rep = {4}":
        "{0}（{1}，n_rep {2}）：上下文 2k / 32k / 1M 时的上限 = {3} FLOP/字节  ->  n_rep = {4}",
    "requests at KV memory = weight memory": "KV 显存 = 权重显存时的请求数", "bytes per sequence": "每个序列的字节数",
    'kv_cache_dtype="fp8", activation peak {0}': 'kv_cache_dtype="fp8"，激活峰值 {0}', "{0} KiB per token": "{0} KiB（每个 token）",
    # table headers still in English (found by scanning the Chinese notebooks' text tables)
    "requests to exceed": "超过权重所需的请求数", "their KV cache (GB)": "它们的 KV 缓存（GB）",
    "old rows": "旧行", "new rows": "新行", "K unchanged": "K 未变", "V unchanged": "V 未变",
    "weight products FLOP/byte": "权重乘法 FLOP/字节", "attention FLOP/byte": "注意力 FLOP/字节",
    "whole step FLOP/byte": "整步 FLOP/字节", "KV reads / all bytes": "KV 读取 / 全部字节",
    "idle slot-steps": "空闲槽位步数", "mean TTFT (passes)": "平均 TTFT（前向传播次数）", "max blocks": "最多块数",
    "tokens prefilled": "预填充的 token 数",
    "empty slots": "空槽位", "empty %": "空槽位 %", "table entries": "块表项数", "entries / sequence": "每个序列的表项数",
    "empty % (simulated)": "空槽位 %（模拟）",
    "k and v": "k 和 v", "flash = the model's attention (1e-5)": "flash = 模型的注意力（1e-5）",
    "flash = plain_attention (1e-5)": "flash = plain_attention（1e-5）",
    "one layer, one step": "一层，一步", "K and V (the cache)": "K 和 V（缓存）", "everything else": "其余全部",
    "cache share": "缓存占比",
    "key tile": "键分块", "query tile": "查询分块", "Q, K, V, O once (the floor)": "Q、K、V、O 各一次（下限）",
    "prompt length T (tokens)": "提示词长度 T（token）", "MiB moved, one layer": "搬运的 MiB，一层",
    "One llama-2-7b attention layer (32 heads × 128, fp16): HBM traffic of one prefill":
        "llama-2-7b 的一个注意力层（32 个头 × 128，fp16）：一次预填充的 HBM 流量",
    "key position": "键位置", "query position": "查询位置",
    "every position kept (ConcatKVCache)": "保留每个位置（ConcatKVCache）", "ring buffer, W = {0} (KVCache)": "环形缓冲区，W = {0}（KVCache）",
    "tokens in the sequence": "序列中的 token 数", "cache .nbytes (KiB)": "缓存 .nbytes（KiB）",
    "extra bits per token vs the full cache": "相对完整缓存每个 token 多出的比特数",
    "position (dotted: W = {0}, where <s> leaves the window)": "位置（点线：W = {0}，<s> 在此移出窗口）",
    "weights (hatched)": "权重（横线）", "KV blocks": "KV 块", "left over": "剩余", "requested: {0} × {1} GiB": "申请：{0} × {1} GiB",
    "GiB (H200, bf16, no activation peak)": "GiB（H200，bf16，不计激活峰值）",
    # -- 00_index --
    "{0} notebooks in notebooks/; the map lists {1}; same: {2}": "notebooks/ 里有 {0} 个笔记本；地图列出 {1} 个；一致：{2}",
    "missing from the map: {0} | listed but absent: {1}": "地图上缺少：{0} | 列出但不存在：{1}",
    "none": "无",
    "reserved: {0} positions x {1} layers x K and V = {2:,} bytes": "预留：{0} 个位置 × {1} 层 × K 和 V = {2} 字节",
    "lm: {0} layers, d_model {1}, {2} heads of {3} dims, {4}, {5}, {6}; context {7} positions; {8:,} parameters; "
    "{9:,} tokens, one per character": "lm：{0} 层，d_model {1}，{2} 个头，每头 {3} 维，{4}，{5}，{6}；上下文 {7} 个位置；"
                                       "{8} 个参数；{9} 个 token，每个字符一个",
    "trained {0:,} steps, {1:.0f} min on {2} ({3})": "训练 {0} 步，在 {2}（{3}）上用时 {1} 分钟",
    # -- 01_transformer_decoder --
    "{0} layers, d_model={1}, {2} heads x head_dim={3}, d_ff={4}, vocab={5}, norm={6}, activation={7}, positions={8}":
        "{0} 层，d_model={1}，{2} 个头 × head_dim={3}，d_ff={4}，vocab={5}，norm={6}，activation={7}，positions={8}",
    "{0:,} parameters": "{0} 个参数",
    "tokens: {0}  ids: {1}": "token：{0}  id：{1}",
    "same as lib's norm1: {0}": "与 lib 的 norm1 相同：{0}",
    "layer 0, head 0: row = query token, column = key token": "第 0 层，第 0 头：行 = 查询 token，列 = 键 token",
    "h2 == model.blocks[0](h0): {0}": "h2 == model.blocks[0](h0)：{0}",
    "{0:<13} {1:<16} equal (atol 1e-5): {2}": "{0} {1} 相等（atol 1e-5）：{2}",
    "after layer {0}: {1}  equal to lib's hidden state: {2}": "第 {0} 层之后：{1}  与 lib 的隐藏状态相等：{2}",
    "lm_head shares the embedding matrix (tied): {0}": "lm_head 与嵌入矩阵共用权重（tied）：{0}",
    "equal to model(ids)[:, -1]: {0}": "等于 model(ids)[:, -1]：{0}",
    "probabilities sum to {0}": "概率之和为 {0}",
    "{0} corpus lines; first character: share of lines vs the model's probability":
        "语料共 {0} 行；第一个字符：各行所占比例与模型给出的概率",
    "  {0}  {1}/{2} = {3:.3f}   model {4:.3f}": "  {0}  {1}/{2} = {3}   模型 {4}",
    "{0:<48} equal to lib: {1}   {2:>3} token(s) can be drawn{3}": "{0} 与 lib 相等：{1}   {2} 个 token 可被采样{3}",
    "{0:<48} equal to lib: {1}   {2:>3} token(s) can be drawn: {3}": "{0} 与 lib 相等：{1}   {2} 个 token 可被采样：{3}",
    "lm: {0} layers, d_model={1}, {2} heads, vocab={3}, context {4}, {5:,} parameters":
        "lm：{0} 层，d_model={1}，{2} 个头，vocab={3}，上下文 {4}，{5} 个参数",
    "after {0}: {1} tokens hold 0.9 of the probability; the six most likely:": "在 {0} 之后：{1} 个 token 占 0.9 的概率；最可能的六个：",
    "T={0}: the most likely character has p = {1:.4f}; {2:>4} of {3} tokens hold 0.9 of the probability":
        "T={0}：最可能的字符 p = {1}；{3} 个 token 中有 {2} 个占 0.9 的概率",
    "seed 1 twice, identical: {0}": "随机种子 1 跑两次，结果相同：{0}",
    "--- {0}: {1} complete lines, {2} of them repeat an earlier line": "--- {0}：{1} 个完整行，其中 {2} 行重复了前面的行",
    "T=0.8, seed {0}": "T=0.8，随机种子 {0}",
    "fill in both shapes, then run this cell again": "填好两个形状，再运行这个单元格",
    "attention: {0}": "注意力：{0}",
    "FFN: {0}": "FFN：{0}",
    "right": "对",
    # -- 02_autoregressive_generation --
    "reserved: {0} positions = 1 (prompt) + 10 (max_new_tokens) - 1, {1:,} bytes (nbytes)":
        "预留：{0} 个位置 = 1（提示词）+ 10（max_new_tokens）- 1，{1} 字节（nbytes）",
    "holding:  {0} positions (<s>人工智能; <eos> was never fed), {1:,} bytes (used_bytes)":
        "已占用：{0} 个位置（<s>人工智能；<eos> 从未输入），{1} 字节（used_bytes）",
    "parallel: {0}  stepwise: {1}": "并行：{0}  逐步：{1}",
    "the same logits (allclose, atol=1e-5): {0}": "logits 相同（allclose，atol=1e-5）：{0}",
    "argmax at each position: {0}": "每个位置的 argmax：{0}",
    "lm: {0} layers, d_model={1}, {2} heads, vocab={3}, context {4}, {5:,} parameters (chat: {6:,})":
        "lm：{0} 层，d_model={1}，{2} 个头，vocab={3}，上下文 {4}，{5} 个参数（chat：{6}）",
    "one parallel forward over all {0} positions: {1:.2f} ms": "对全部 {0} 个位置做一次并行前向传播：{1} ms",
    "{0:13}: {1:.2f} ms at step 0, {2:.2f} ms at step {3}: about {4:.1f} s for {5} steps":
        "{0}：第 0 步 {1} ms，第 {3} 步 {2} ms：{5} 步共约 {4} s",
    "{0:>7} cache: K/V computed per layer at step 0 (the prompt): {1}, at step 1 (context {2}): {3}":
        "{0}缓存：每层计算的 K/V，第 0 步（提示词）{1} 个，第 1 步（上下文 {2}）{3} 个",
    "with": "有", "without": "无",
    "position embeddings: {0} = (max_seq_len, d_model)": "位置嵌入：{0} = (max_seq_len, d_model)",
    "prompt length: {0}": "提示词长度：{0}",
    "max_new_tokens={0}: ok, {1} tokens in all: it stopped after {2} new token(s) because {3}":
        "max_new_tokens={0}：可以，共 {1} 个 token：生成 {2} 个新 token 后停止，因为{3}",
    "it chose <eos>": "它选了 <eos>",
    "K/V computed in layer 0 over the {0} steps: {1} with the cache, {2} without": "{0} 步中第 0 层计算的 K/V：有缓存 {1} 个，无缓存 {2} 个",
    "cache off, K/V of each position at step 3: {0} | counts so far: {1} with cache, {2} without":
        "关闭缓存，第 3 步各位置的 K/V：{0} | 目前累计：有缓存 {1} 个，无缓存 {2} 个",
    # -- 03_kv_cache --
    "without cache: {0}": "无缓存：{0}",
    "with cache:    {0}": "有缓存：{0}",
    "without cache, K/V computed per step: {0}  recomputed: {1}  total {2} of which {3} again":
        "无缓存，每步计算的 K/V：{0}  重复计算：{1}  共 {2} 个，其中 {3} 个是重算",
    "with cache,    K/V computed per step: {0}  read from the cache: {1}  total {2}":
        "有缓存，每步计算的 K/V：{0}  从缓存读取：{1}  共 {2} 个",
    "tokens: identical to lib.generate: {0}": "token：与 lib.generate 相同：{0}",
    "lib.KVCache holds {0} keys per layer (batch, heads, positions, head_dim)": "lib.KVCache 每层存放 {0} 的键（批次，头，位置，head_dim）",
    "max |hand-made K, V - lib.KVCache|: {0}": "max |手写的 K、V - lib.KVCache|：{0}",
    "max |hand-made logits - lib logits| over {0} steps: {1}": "{0} 步中 max |手写 logits - lib logits|：{1}",
    "after the prefill of <s>人: {0} positions; keys(0): {1}": "预填充 <s>人 之后：{0} 个位置；keys(0)：{1}",
    "after feeding 工:           {0} positions; keys(0): {1}": "输入 工 之后：      {0} 个位置；keys(0)：{1}",
    "next token: {0}": "下一个 token：{0}",
    "reserved up front: {0:,} bytes (lib.kv_cache_bytes for 8 tokens in fp32: {1:,}); holding tokens: {2:,}":
        "预先预留：{0} 字节（lib.kv_cache_bytes 给出 8 个 fp32 token：{1}）；已存 token 占：{2}",
    "its keys for <s>人工 vs the hand-made buffers: {0}": "它存的 <s>人工 的键与手写缓冲区相比：{0}",
    "position offset of the next token = cache.seq_len = {0}": "下一个 token 的位置偏移 = cache.seq_len = {0}",
    "cached keys == raw keys rotated once, each at its own position: {0}": "缓存的键 == 原始键在各自位置旋转一次：{0}",
    "the decode step left the 4 earlier keys bit for bit as they were: {0}": "解码步让之前的 4 个键逐位保持不变：{0}",
    "{0} steps: a prefill of {1} tokens, then one token per step; it wrote": "{0} 步：先预填充 {1} 个 token，之后每步一个 token；它写出了",
    "previous-token head: layer {0}, head {1}, {2:.2f} of each query's attention on the token just before it":
        "前一个 token 头：第 {0} 层第 {1} 头，每个查询把 {2} 的注意力放在紧挨着它的前一个 token 上",
    "grid: {0} (steps, key positions); newest key per step: {1} … {2}": "网格：{0}（步，键位置）；每步最新的键：{1} … {2}",
    "every row sums to 1 over the keys that exist at its step": "每一行在该步已有的键上求和为 1",
    "steps whose query attends most to the key just before its own: {0} of {1}": "查询最关注紧前一个键的步数：{0}/{1}",
    "{0:4} {1:38} {2:22} same tokens: {3}, max |Δlogit| over {4} steps {5}": "{0} {1} {2} token 相同：{3}，{4} 步中 max |Δlogit| {5}",
    "{0} cache: exponent per step {1}": "{0}缓存：每步的指数 {1}",
    "{0:14}exponent over a generation {1}": "{0}整个生成的指数 {1}",
    "{0:14} tokens fed per step {1}  FFN FLOPs per step {2}": "{0} 每步输入的 token {1}  每步 FFN FLOPs {2}",
    "{0:14} total: projections {1:,}  FFN {2:,}  attention {3:,}": "{0} 总计：投影 {1}  FFN {2}  注意力 {3}",
    "lm in fp16: weights in memory {0}; KV cache of one full window ({1} tokens) {2}": "lm（fp16）：显存中的权重 {0}；一个满窗口（{1} 个 token）的 KV 缓存 {2}",
    "KV cache memory = weight memory at {0:,.0f} tokens per sequence at batch 1, {1:,.0f} at batch 8":
        "KV 缓存显存 = 权重显存：批次 1 时每个序列 {0} 个 token，批次 8 时 {1} 个",
    "at t = 512 a step without the cache takes {0:.0f}x as long as one with it": "t = 512 时，无缓存的一步耗时是有缓存的 {0} 倍",
    "{0:9} ms per step at t = {1} … {2}: {3:.2f} … {4:.2f}, log-log slope {5}": "{0} t = {1} … {2} 时每步毫秒数：{3} … {4}，双对数坐标下的斜率 {5}",
    "one token's K and V in all {0} layers: {1:,} bytes (fp32)": "一个 token 在全部 {0} 层的 K 和 V：{1} 字节（fp32）",
    "without: {0}": "无缓存：{0}", "with: {0}": "有缓存：{0}",
    # -- 04_worked_example --
    "parameters: {0:,} (lib.costs.param_count says {1:,})": "参数：{0} 个（lib.costs.param_count 给出 {1}）",
    "trained on the line(s): {0}": "训练语料：{0}",
    "scores q·k/√4           {0}": "分数 q·k/√4             {0}",
    "softmax, by hand        {0}": "手算 softmax            {0}",
    "weights the model used  {0}": "模型用的权重            {0}",
    "Σ w·v, by hand          {0}": "手算 Σ w·v              {0}",
    "weights @ V (captured)  {0}": "权重 @ V（捕获的）      {0}",
    "K/V computed per step, layer 0, without cache: {0} total {1}": "第 0 层每步计算的 K/V，无缓存：{0} 共 {1}",
    "K/V computed per step, layer 0, with cache:    {0} total {1}": "第 0 层每步计算的 K/V，有缓存：{0} 共 {1}",
    "layer {0}: {1} positions recomputed, K and V allclose to the cache (atol 1e-6): {2}; logits of every step within "
    "1e-5: {3}": "第 {0} 层：重算 {1} 个位置，K 和 V 与缓存 allclose（atol 1e-6）：{2}；每步 logits 相差在 1e-5 以内：{3}",
    "ridge point of the {0}: {1:.1f} FLOPs per byte": "{0} 的脊点：每字节 {1} FLOPs",
    "whole step at context {0}, however large the batch: at most {1:.3g} FLOP/byte (lib.costs.decode_intensity_limit)":
        "上下文 {0} 时的整步，批次再大：最多 {1} FLOP/字节（lib.costs.decode_intensity_limit）",
    "tiny model, measured decode step on {0}: median {1:,.0f} µs": "tiny 模型在 {0} 上实测的解码步：中位数 {1} µs",
    "the same step at full H100 bandwidth: {0:.2f} ns -> the measured step is {1:,.0f} times longer":
        "同一步在 H100 满带宽下：{0} ns -> 实测的一步长 {1} 倍",
    "passes: {0}": "前向传播次数：{0}", "rows: {0}": "行数：{0}",
    # -- 05_kv_cache_memory --
    "chat: {0} layers, {1} KV heads, head_dim {2}, context window {3}": "chat：{0} 层，{1} 个 KV 头，head_dim {2}，上下文窗口 {3}",
    "{0:,} bytes = {1} for 16 tokens, {2} per token": "{0} 字节 = 16 个 token 共 {1}，每个 token {2}",
    "memory_allocated grew by {0:,} bytes; KVCache.nbytes = {1:,}; kv_cache_bytes = {2:,}":
        "memory_allocated 增加了 {0} 字节；KVCache.nbytes = {1}；kv_cache_bytes = {2}",
    "no CUDA device here: the memory_allocated check runs only on a GPU (the formula was checked above on real CPU "
    "tensors)": "这里没有 CUDA 设备：memory_allocated 的检查只在 GPU 上运行（公式已在上面用真实的 CPU 张量检查过）",
    "q {0}, cached k {1}, repeated k {2}": "q {0}，缓存的 k {1}，重复后的 k {2}",
    "attention weights by hand == the model's; query heads 0 and 1 attend over the same keys, with their own queries":
        "手算的注意力权重 == 模型的；查询头 0 和 1 关注同一组键，各用自己的查询",
    "llama-2-7b: {0:,} parameters; weights in memory:": "llama-2-7b：{0} 个参数；显存中的权重：",
    "a round 7e9 parameters x 2 bytes = {0:.1f} GB": "按整数 7e9 个参数 × 2 字节 = {0} GB",
    "  {0:5s} {1:>15,} bytes = {2:6.2f} GB = {3:>10}": "  {0} {1} 字节 = {2} GB = {3}",
    "lm: {0:,} parameters, {1} layers, {2} KV heads, head_dim {3}, context {4}, {5}":
        "lm：{0} 个参数，{1} 层，{2} 个 KV 头，head_dim {3}，上下文 {4}，{5}",
    "the KV cache is {0:.2f}x the weights; they are equal at {1:,.0f} cached tokens, {2:.2f} full-context requests":
        "KV 缓存是权重的 {0} 倍；缓存 {1} 个 token 时二者相等，即 {2} 个满上下文请求",
    "key        {0} ...": "键         {0} ...",
    "largest error over the 64 numbers: {0:.2f} of a half step (scale / 2 = {1:.4f}): {2}":
        "64 个数中的最大误差：半格的 {0}（scale / 2 = {1}）：{2}",
    "int8 {0:,} + scales {1:,} = {2:,} bytes; fp32 {3:,} ({4:.2f}x); fp16 {5:,} ({6:.2f}x)":
        "int8 {0} + scale {1} = {2} 字节；fp32 {3}（{4} 倍）；fp16 {5}（{6} 倍）",
    "no token differs in {0} steps": "{0} 步中没有 token 不同",
    "steps 0 to {0}, the same with both caches:": "第 0 到 {0} 步，两种缓存相同：",
    "step {0}: the fp32 cache chooses {1}, ahead of {2} by {3:.3f} logits; the int8 cache chooses {4}":
        "第 {0} 步：fp32 缓存选 {1}，比 {2} 高 {3} 个 logit；int8 缓存选 {4}",
    "fp32 goes on: {0}": "fp32 接着写：{0}", "int8 goes on: {0}": "int8 接着写：{0}",
    "tokens that differ in the {0} steps: {1}": "{0} 步中不同的 token：{1}",
    "llama-2-7b on 80 GiB: {0} requests if each reserves 4,096 tokens, {1} if each holds the 600 it uses ({2:.1f}x "
    "more at once)": "llama-2-7b，80 GiB：每个请求预留 4,096 个 token 时放得下 {0} 个，只存实际用到的 600 个时 {1} 个"
                     "（同时容纳的请求是前者的 {2} 倍）",
    "skipped: no model of your own loaded": "已跳过：没有加载你自己的模型",
    "cache after {0} tokens: {1:,} bytes (= kv_cache_bytes)": "{0} 个 token 之后的缓存：{1} 字节（= kv_cache_bytes）",
    # -- 07_misconceptions --
    "{0:12s} {1:>9,} parameters, {2} layer(s), d_model {3}, vocabulary {4:,}": "{0} {1} 个参数，{2} 层，d_model {3}，词表 {4}",
    "{0} tensors in state_dict, from these modules: {1}": "state_dict 中有 {0} 个张量，来自这些模块：{1}",
    "buffers: {0}": "缓冲区：{0}",
    "parameters: {0:,} = lib.costs.param_count: {1:,}": "参数：{0} = lib.costs.param_count：{1}",
    "positions in the cache after each step: {0}": "每步之后缓存中的位置数：{0}",
    "weights unchanged by generation: {0} | state_dict has the same {1} entries": "生成没有改变权重：{0} | state_dict 仍是同样的 {1} 项",
    "concat cache bytes after each step: {0}": "每步之后拼接缓存的字节数：{0}",
    "bytes per position: {0} = 2 (K, V) x 4 layers x 4 heads x 16 dims x 4 bytes": "每个位置的字节数：{0} = 2（K、V）× 4 层 × 4 个头 × 16 维 × 4 字节",
    "two different cache objects: {0}": "两个不同的缓存对象：{0}",
    "first cached key (layer 0) the same, both start with <s>: {0}": "第一个缓存的键（第 0 层）相同，两者都以 <s> 开头：{0}",
    "second cached key differs (人 vs 深): {0}": "第二个缓存的键不同（人 对 深）：{0}",
    "while the request's result is alive: {0}": "请求的结果还在时：{0}",
    "after it is dropped, the cache still exists: {0}": "丢掉它之后，缓存还在：{0}",
    "the weights are still there: {0}": "权重还在：{0}",
    "llama-2-7b in fp16": "llama-2-7b（fp16）",
    "  weights in memory: {0:,} parameters x 2 bytes = {1:.2f} GB = {2:.2f} GiB": "  显存中的权重：{0} 个参数 × 2 字节 = {1} GB = {2} GiB",
    "  KV cache:          {0} KiB per token (2 x 32 layers x 32 heads x 128 dims x 2 bytes)":
        "  KV 缓存：          每个 token {0} KiB（2 × 32 层 × 32 个头 × 128 维 × 2 字节）",
    "  KV cache memory = weight memory at {0:,.0f} cached tokens, summed over all concurrent requests":
        "  缓存 {0} 个 token 时 KV 缓存显存 = 权重显存（所有并发请求加在一起）",
    "32 requests x 4096 tokens: {0:.1f} GB of KV cache = {1:.1f} x the weights in memory":
        "32 个请求 × 4096 个 token：KV 缓存 {0} GB = 显存中权重的 {1} 倍",
    "target alone:      {0}": "仅目标模型：      {0}",
    "draft + target:    {0}": "草稿 + 目标：     {0}",
    "identical tokens:  {0}": "token 相同：      {0}",
    "target passes: {0} alone, {1} with the draft (+ {2} passes of the {3:.0f}x smaller draft)":
        "目标模型前向传播次数：单独 {0} 次，配草稿模型 {1} 次（另加草稿模型 {2} 次，它的大小是目标模型的 1/{3}）",
    "{0}, the first prompt: {1}": "{0}，第一个提示词：{1}",
    "English": "英文", "Chinese": "中文", "{0} CPU thread": "{0} 个 CPU 线程", "{0} CPU threads": "{0} 个 CPU 线程",
    "k = 4, greedy, English: drafts kept {0}, {1} tokens per target pass": "k = 4，贪心，英文：草稿被接受 {0}，目标模型每次前向传播 {1} 个 token",
    "α implied by {0} tokens per pass: {1:.2f}": "由每次前向传播 {0} 个 token 推出的 α：{1}",
    "α measured per decided proposal:      {0:.2f}": "按每个已判定提议实测的 α：      {0}",
    "{0}: predicted minus measured per full round, {1} rows: from {2:+.2f} to {3:+.2f} tokens":
        "{0}：每个完整轮次的预测减实测，{1} 行：从 {2} 到 {3} 个 token",
    "α = {0:.2f}; speed-up (1 - α^(k+1)) / ((1 - α)(k·c + 1)) for k = 1 … 6:": "α = {0}；k = 1 … 6 时的加速比 (1 - α^(k+1)) / ((1 - α)(k·c + 1))：",
    "one pass over the {0}-token prompt: lm {1}, lm-draft {2}": "对 {0} 个 token 的提示词做一次前向传播：lm {1}，lm-draft {2}",
    "32 new tokens, greedy: lm alone {0}, lm-draft + lm {1}": "32 个新 token，贪心：仅 lm {0}，lm-draft + lm {1}",
    "lm-draft + lm vs lm alone: {0}": "lm-draft + lm 对比仅 lm：{0}",
    "a proposal is kept with probability sum min(p, q) = {0:.2f}": "提议被接受的概率 sum min(p, q) = {0}",
    "output distribution == p: {0}": "输出分布 == p：{0}",
    "counts vs the draft's distribution: {0}": "计数与草稿模型的分布：{0}",
    "most frequent first tokens: {0}": "最常见的第一个 token：{0}",
    "{0} | full-sequence logits {1} | per-step logits {2}": "{0} | 整序列 logits {1} | 逐步 logits {2}",
    "teacher forcing == cached decoding (allclose, atol 1e-5): {0}": "教师强制 == 带缓存的解码（allclose，atol 1e-5）：{0}",
    "same greedy tokens: {0}": "贪心 token 相同：{0}",
    "forward passes: {0} for teacher forcing, {1} for decoding": "前向传播次数：教师强制 {0} 次，解码 {1} 次",
    "K/V computed per layer, teacher forcing: {0} in 1 pass": "每层计算的 K/V，教师强制：1 次前向传播 {0} 个",
    "K/V computed per layer, cached decoding: {0} = {1} in {2} passes": "每层计算的 K/V，带缓存的解码：{0} = {1}，共 {2} 次前向传播",
    "earlier K rows identical after every later step (all layers): {0}": "之后每一步过后，之前的 K 行都不变（所有层）：{0}",
    "cached K == teacher-forced K (allclose, atol 1e-5): {0}": "缓存的 K == 教师强制的 K（allclose，atol 1e-5）：{0}",
    "layer 0, head 0, the stored key of <s> (first 4 of 16 dims) after each step:": "第 0 层第 0 头，每步之后存下的 <s> 的键（16 维中的前 4 维）：",
    "  step {0}: {1}  ({2} keys cached)": "  第 {0} 步：{1}  （已缓存 {2} 个键）",
    # -- 09_paged_cache --
    "llama-2-13b, fp16: 2 x {0} layers x {1} KV heads x {2} x 2 bytes = {3:,} bytes ({4:.0f} KiB) per token":
        "llama-2-13b，fp16：2 × {0} 层 × {1} 个 KV 头 × {2} × 2 字节 = 每个 token {3} 字节（{4} KiB）",
    "one region of 2048 positions: {0:.2f} GiB": "一段 2048 个位置的区域：{0} GiB",
    "  an answer that ends at {0:4d} tokens fills {1:6.1%} of it": "  在 {0} 个 token 处结束的回答占用其中的 {1}",
    "both generate: {0}": "两者都生成：{0}",
    "the paged cache's block table: {0}": "分页缓存的块表：{0}",
    "{0:12s}  holds {1:6,} bytes, of which {2:5,} hold tokens ({3:.1%})": "{0}  占 {1} 字节，其中 {2} 存有 token（{3}）",
    "a: {0} tokens, block table {1}": "a：{0} 个 token，块表 {1}",
    "b: {0} tokens, block table {1}": "b：{0} 个 token，块表 {1}",
    "position 9 of a ({0}) lives in block {1}, slot {2}": "a 的位置 9（{0}）在块 {1} 的槽位 {2}",
    "logits allclose (atol 1e-5): {0}": "logits allclose（atol 1e-5）：{0}",
    "keys identical in every layer: {0}": "每层的键都相同：{0}",
    "{0:10s} -> {1:36s} same tokens with block sizes 1, 3, 16: {2}": "{0} -> {1} 块大小为 1、3、16 时 token 相同：{2}",
    "after the fork ({0}):": "分叉之后（{0}）：",
    "after the first decode step ({0}): {1}": "第一个解码步之后（{0}）：{1}",
    "block tables: {0}": "块表：{0}",
    "blocks held: {0} shared vs {1} for four separate caches; copy-on-write copies: {2}": "占用的块：共享 {0} 个，四个独立缓存则要 {1} 个；写时复制次数：{2}",
    "after release, free blocks: {0} of {1}": "释放之后，空闲块：{0}/{1}",
    "prompt tokens computed: {0} (fork: {1}); blocks held after the prompts: {2} (fork: {3}); copies on write: {4}":
        "计算的提示词 token：{0}（分叉：{1}）；提示词之后占用的块：{2}（分叉：{3}）；写时复制次数：{4}",
    "prefix cache {0}: prompt tokens computed {1:3d} of {2}, blocks reused {3}": "前缀缓存{0}：计算了 {2} 个提示词 token 中的 {1} 个，复用 {3} 个块",
    "on": "开", "off": "关",
    "the request still holds its {0} tokens in blocks {1}": "请求仍在块 {1} 中保存它的 {0} 个 token",
    "{0:13s}  {1:10s}  mean {2:6.1f}  median {3:4d}  90th percentile {4:4d}  max {5:4d}": "{0}  {1}  均值 {2}  中位数 {3}  90 分位 {4}  最大 {5}",
    "KV budget: {0:,} positions = {1:.1f} GiB for llama-2-13b in fp16": "KV 预算：{0} 个位置 = {1} GiB（llama-2-13b，fp16）",
    "token states, prior systems: paper {0}-{1}%, this simulation {2:.1f}-{3:.1f}% (max, pow2, oracle)":
        "存 token 的比例，以往的系统：论文 {0}-{1}%，本模拟 {2}-{3}%（max、pow2、oracle）",
    "waste with paging:           paper under {0}%, this simulation {1:.1f}%": "分页的浪费：                论文低于 {0}%，本模拟 {1}%",
    "requests in the batch:       max {0:.1f}, paged {1:.1f} ({2:.1f}x)": "批次中的请求数：            max {0}，分页 {1}（{2} 倍）",
    "steps to serve all 400:      max {0:,}, paged {1:,}": "服务完全部 400 个所需步数：  max {0}，分页 {1}",
    "price of paging here: {0} preemptions, {1:,} tokens recomputed": "这里分页的代价：{0} 次抢占，重算 {1} 个 token",
    "stream after": "经过", "|h| at 智": "“智”处的 |h|", "top next-token guesses": "最可能的下一个 token",
    "seed 0: {0}": "种子为 0：{0}", "again : {0}": "再抽一次：{0}",
    "generate's first token with seed 0: {0} | first draw: {1}": "generate 用种子 0 生成的第一个 token：{0} | 第一次抽样：{1}",
    "step {0}: input {1} → {2}   (p = {3})": "第 {0} 步：输入 {1} → {2}   （p = {3}）",
    "step {0}: source says {1:16} real input {2:14} → {3}": "第 {0} 步：原文写 {1} 实际输入 {2} → {3}",
    "vllm is not installed in this environment (it needs an NVIDIA GPU machine: pip install vllm)":
        "本环境没有安装 vllm（要在有 NVIDIA GPU 的机器上安装：pip install vllm）",
    "no CUDA GPU is visible to torch (vLLM's GPU worker needs one)": "torch 看不到 CUDA GPU（vLLM 的 GPU worker 需要一块）",
    "result: {0}": "结果：{0}",
    "'(no such step)'": "'（没有这一步）'",
    "step 0 candidates: {0}": "第 0 步的候选：{0}",
    "after <s>{0}: {1}": "<s>{0} 之后：{1}",
    "answer lengths: {0}": "回答长度：{0}",
    "{0} ticks, {1} requests; each got the tokens generate gives it alone: {2}":
        "{0} 个时刻，{1} 个请求；每个请求得到的 token 都与 generate 单独为它生成的相同：{2}",
    "models: {0}": "模型：{0}", "every block back in the pool: {0}": "所有块都已还回池中：{0}",
    "both policies give every request the same tokens; answers from {0} to {1} tokens": "两种策略给每个请求的 token 相同；回答长度从 {0} 到 {1} 个 token",
    "continuous / static: {0:.2f}x the tokens per second, {1:.2f}x the mean time to first token":
        "连续批处理 / 静态批处理：每秒 token 数为 {0} 倍，平均首 token 延迟为 {1} 倍",
    "for llama-2-13b in fp16 ({0:,} bytes of K/V per position):": "对 llama-2-13b（fp16，每个位置 {0} 字节 K/V）：",
    "  swap moves {0:.1f} GiB between GPU and CPU memory (out and back) and holds up to {1:.2f} GiB in CPU memory at "
    "once": "  换出在 GPU 和 CPU 内存之间搬运 {0} GiB（换出再换回），CPU 内存中同时最多存 {1} GiB",
    "  recompute prefills {0:,} tokens again, {1:.0%} of the tokens the requests generate":
        "  重计算要再预填充 {0} 个 token，是请求生成的 token 的 {1}",
    "  at best on an H100 (every FLOP at peak, PCIe 5.0 at {0:.0f} GB/s each way): recompute {1:.2f} s, swap {2:.2f} s":
        "  在 H100 上最好的情况（每个 FLOP 都跑在峰值，PCIe 5.0 单向 {0} GB/s）：重计算 {1} s，换出 {2} s",
    "every completion equals lib.generate under both ways of preempting": "两种抢占方式下，每个补全都与 lib.generate 相同",
    # -- 06_roofline --
    "FLOPs {0}; bytes: weights read {1} + KV read {2} + KV write {3}": "FLOPs {0}；字节：读取权重 {1} + 读取 KV {2} + 写入 KV {3}",
    "arithmetic intensity {0:.4f} FLOP/byte": "算术强度 {0} FLOP/字节",
    "intensity {0:.4f} FLOP/byte; KV reads are {1:.1f}% of the bytes moved": "强度 {0} FLOP/字节；KV 读取占搬运字节数的 {1}%",
    "{0}: peak {1:.1f} GFLOP/s, read bandwidth {2:.1f} GB/s, ridge {3:.2f} FLOP/byte": "{0}：峰值 {1} GFLOP/s，读带宽 {2} GB/s，脊点 {3} FLOP/字节",
    "chat {0:>7}, batch {1:>2}: {2:7.2f} FLOP/byte -> {3} here": "chat {0}，批次 {1}：{2} FLOP/字节 -> 在这里{3}",
    "{0}: {1:.1f} TFLOP/s dense {2}, {3:.2f} TB/s, ridge {4:.1f} FLOP/byte": "{0}：稠密 {2} {1} TFLOP/s，{3} TB/s，脊点 {4} FLOP/字节",
    "llama-2-7b, one decode step at batch 1 on an H100: {0} to move -> at least {1:.3f} ms, at most {2:.0f} tokens/s":
        "llama-2-7b 在 H100 上以批次 1 解码一步：要搬运 {0} -> 至少 {1} ms，最多 {2} token/s",
    "llama-3-8b at context 128 reaches the ridge at batch {0}; its KV cache then holds {1}": "llama-3-8b 在上下文 128 时于批次 {0} 到达脊点；此时它的 KV 缓存有 {1}",
    "{0}: weight products compute-bound on the H100 from batch {1}, at every context": "{0}：在 H100 上，权重乘法从批次 {1} 起计算受限，与上下文无关",
    "llama-2-7b in fp16: weights in memory {0:.2f} GB, weights read per step {1:.2f} GB; the difference, {2:.3f} GB, is "
    "the embedding table": "llama-2-7b（fp16）：显存中的权重 {0} GB，每步读取的权重 {1} GB；相差的 {2} GB 是嵌入表",
    "KV cache memory = weight memory at {0:,.0f} cached tokens; KV bytes read = weight bytes read at {1:,.0f} cached "
    "tokens: {2:,.0f} tokens apart": "缓存 {0} 个 token 时 KV 缓存显存 = 权重显存；缓存 {1} 个 token 时读取的 KV 字节 = 读取的权重字节：相差 {2} 个 token",
    "{0:>11}, batch 64, context  2048: KV reads are {1:4.1f}% of the bytes": "{0}，批次 64，上下文  2048：KV 读取占字节数的 {1}%",
    "{0:>11}, batch  1, context {1:>5}: KV reads are {2:4.1f}% of the bytes": "{0}，批次  1，上下文 {1}：KV 读取占字节数的 {2}%",
    "correct": "正确",
    # -- 11_flash_attention --
    "plain / flash: {0:.2f}x the bytes; the score matrix is never written": "朴素 / flash：字节数为 {0} 倍；分数矩阵从不写出",
    "softmax(scores) · values = {0:.4f}, the same as the last acc / l": "softmax(scores) · values = {0}，与最后的 acc / l 相同",
    "{0} tokens of held-out text, starting {1} ...": "{0} 个 token 的留出文本，开头是 {1} ...",
    "the naive path holds P {0}: {1} per layer, and S before it as much; flash holds one 64 x 64 tile of scores per "
    "head: {2}, {3}x less": "朴素实现要存 P {0}：每层 {1}，之前的 S 也一样多；flash 每个头只存一个 64 x 64 的分数分块：{2}，只有前者的 1/{3}",
    "{0}: {1} tiles, {2} full, {3} masked, {4} skipped": "{0}：{1} 个分块，完整 {2} 个，带掩码 {3} 个，跳过 {4} 个",
    "S and P, written and read back by plain attention: {0}; plain / flash: {1:.2f}x the bytes":
        "朴素注意力写出再读回的 S 和 P：{0}；朴素 / flash：字节数为 {1} 倍",
    "cache: {0} positions; layer {1}; each chunk's weight in the merge, exp(lse_i - lse), per head":
        "缓存：{0} 个位置；第 {1} 层；合并时每一段的权重 exp(lse_i - lse)，按头",
    "merged chunks = the model's attention for this step = flash_attention with one query": "合并的各段 = 模型这一步的注意力 = 只有一个查询的 flash_attention",
    "{0} layers: the step reads {1} of cached K and V (lib.costs.decode_cost agrees), flash or not":
        "{0} 层：这一步读取 {1} 的缓存 K 和 V（与 lib.costs.decode_cost 一致），用不用 flash 都一样",
    # -- 12_sliding_window --
    "{0} layers, {1} heads, max_seq_len {2} | sliding_window: {3}": "{0} 层，{1} 个头，max_seq_len {2} | sliding_window：{3}",
    "keys each query sees, causal:   {0}": "每个查询看到的键，因果：     {0}",
    "keys each query sees, window 4: {0}": "每个查询看到的键，窗口 4：   {0}",
    "{0} positions per query; {1} (same number of parameters)": "每个查询 {0} 个位置；{1}（参数个数相同）",
    "slots: {0} (not max_len={1}); nbytes: {2:,} from the start": "槽位：{0}（不是 max_len={1}）；nbytes：一开始就是 {2}",
    "same tokens: {0}": "token 相同：{0}",
    "every position kept: nbytes {0:,} | ring: nbytes {1:,} ({2} slots for max_len {3})":
        "保留每个位置：nbytes {0} | 环形：nbytes {1}（max_len {3} 只用 {2} 个槽位）",
    "greedy tokens with the ring = without a cache: {0}": "用环形缓冲区的贪心 token = 无缓存的：{0}",
    "{0:14s} logits allclose to uncached: {1}   keys held per layer: {2:2d}   nbytes: {3:,}":
        "{0} logits 与无缓存 allclose：{1}   每层保存的键：{2}   nbytes：{3}",
    "lm: {0} layers, d_model {1}, {2} heads, context {3}, {4:,} parameters, {5:,} tokens (one per character)":
        "lm：{0} 层，d_model {1}，{2} 个头，上下文 {3}，{4} 个参数，{5} 个 token（每个字符一个）",
    "{0}: {1} windows of {2} tokens; the first begins {3}": "{0}：{1} 个窗口，每个 {2} 个 token；第一个的开头是 {3}",
    "lm, held-out text: the weight on position 0, per head (an even spread would give {0:.3f})": "lm，留出文本：每个头放在位置 0 上的权重（平均分配时为 {0}）",
    "{0} ... (64 tokens)": "{0} ...（64 个 token）",
    # -- 13_vllm_bridge --
    "read from vLLM {0} ({1} ideas)": "读自 vLLM {0}（{1} 个概念）",
    "no vLLM source on this machine; the map was checked in full against vLLM {0}": "这台机器上没有 vLLM 源码；这份对照表已对照 vLLM {0} 完整检查过",
    "total GPU memory           {0:>12}": "GPU 总显存                 {0}",
    "× {0} = requested        {1:>12}": "× {0} = 申请的             {1}",
    "− weights in memory (bf16) {0:>12}": "− 显存中的权重（bf16）     {0}",
    "= available for KV         {0:>12}": "= 可用于 KV                {0}",
    "one block ({0} tokens)      {1:>12}   = {2} × {3:,} bytes per token": "一个块（{0} 个 token）     {1}   = {2} × 每个 token {3} 字节",
    "blocks                     {0:>12,}   (block 0 is vLLM's null block: {1:,} usable)": "块数                       {0}   （块 0 是 vLLM 的空块：可用 {1} 个）",
    "tokens                     {0:>12,}": "token 数                   {0}",
    "full-length requests       {0:>12.2f}   (of {1:,} tokens each)": "满长度请求数               {0}   （每个 {1} 个 token）",
    "skipped: {0}": "已跳过：{0}",
}

_PLACEHOLDER = re.compile(r"\{(\d+)(?::[^{}]*)?\}")
_compiled: list | None = None
_LOG = os.environ.get("KVLAB_I18N_LOG")


def _template(key: str):
    """A key's regex (the whole line) and the order of its placeholders."""
    parts, order, at = [], [], 0
    text = key.replace("{{", "\x00").replace("}}", "\x01")
    for m in _PLACEHOLDER.finditer(text):
        parts.append(re.escape(text[at:m.start()]).replace("\x00", r"\{").replace("\x01", r"\}"))
        name = f"p{m.group(1)}"
        width = re.match(r":(?:.?[<>^=])?[+\- ]?#?0?(\d+)", m.group(0)[len(m.group(1)) + 1:-1])
        least = width.group(1) if width else ""  # a padded value is at least that wide: columns stay apart
        parts.append(f"(?P={name})" if name in order else f"(?P<{name}>.{{{least},}}?)" if least else f"(?P<{name}>.*?)")
        order.append(name)
        at = m.end()
    parts.append(re.escape(text[at:]).replace("\x00", r"\{").replace("\x01", r"\}"))
    return re.compile("".join(parts) + r"\Z", re.S)


def translate_printed(text: str, words: dict, whole: bool = False, markdown: bool = False) -> str:
    """Each line of ``text`` in Chinese where ``ZH_PRINTED`` has it (a value inside it also where ``words``, the
    whole table ``ZH``, has it; ``whole``: a line too, as a figure's label is; ``markdown``: each cell of a
    Markdown table's row alone). With ``KVLAB_I18N_LOG`` set, a
    line left in English is appended to that file (to find what a table still lacks)."""
    global _compiled
    if _compiled is None:  # the longest literal text first: a specific template wins over a general one
        keys = sorted((k for k in ZH_PRINTED if _PLACEHOLDER.search(k)),
                      key=lambda k: -len(_PLACEHOLDER.sub("", k)))
        _compiled = [(_template(k), ZH_PRINTED[k]) for k in keys]

    def word(s: str, depth: int) -> str:  # a value: a known text, or (one level down) a line of its own
        core = s.strip()
        zh = ZH_PRINTED.get(core) or (words.get(core) if core else None)
        if zh is None and depth == 0 and re.search(r"[A-Za-z]{3,}", core):
            zh = line(core, 1)
        return s.replace(core, zh, 1) if zh and "{" not in zh else s

    def line(s: str, depth: int = 0) -> str:
        if s in ZH_PRINTED:
            return ZH_PRINTED[s]
        if whole and s in words and "{" not in words[s]:
            return words[s]
        for rx, zh in _compiled:
            m = rx.match(s)
            if m:
                values = {int(k[1:]): word(v, depth) for k, v in m.groupdict().items()}
                return zh.format(*[values[i] for i in range(len(values))])
        if _LOG and not depth and re.search(r"[A-Za-z]{3,} [A-Za-z]{3,}", s) and not re.search(r"[\u4e00-\u9fff]", s):
            with open(_LOG, "a", encoding="utf-8") as f:
                f.write(("figure: " if whole else "print: ") + s + "\n")
        return s

    def row(s: str) -> str:  # a Markdown table's row: each cell alone (a bold one inside its **)
        if not s.startswith("|"):
            return line(s)
        cells = []
        for c in s.split("|"):
            core = c.strip()
            bold = len(core) > 4 and core.startswith("**") and core.endswith("**")
            zh = line(core[2:-2] if bold else core)
            cells.append(c.replace(core, f"**{zh}**" if bold else zh, 1) if core else c)
        return "|".join(cells)

    return "\n".join((row if markdown else line)(s) for s in text.split("\n"))


ZH_OUTPUTS.update({  # -- nb01 -- 01's predictions and questions (lib.exercises.reveal's `what` and `why`)
    "attention weights": "注意力权重",
    "One weight per (sequence, head, query, key).": "每个（序列，头，查询，键）组合对应一个权重。",
    "FFN activation": "FFN 激活值",
    "up_proj widens each position from d_model to d_ff, and GELU keeps the shape.":
        "up_proj 把每个位置从 d_model 加宽到 d_ff，GELU 不改变形状。",
    "tokens top-p {p} keeps": "top-p 为 {p} 时保留的 token 数",
    "A token stays while the tokens ranked above it hold less than p: {a} before the 2nd, {b} before the 3rd, "
    "{c} before the 4th.":
        "排在前面的 token 合计不到 p，这个 token 就留下：第 2 个之前合计 {a}，第 3 个之前 {b}，第 4 个之前 {c}。",
    "At a huge T every logit / T is about 0, so each of the {V} tokens gets about 1/{V}.":
        "T 极大时，每个 logit / T 都接近 0，{V} 个 token 各得约 1/{V}。",
    "top-k=1 leaves one token, whatever the temperature, so every seed draws it.":
        "top-k=1 只留下一个 token，温度再高也一样，每个随机种子抽到的都是它。",
    "LayerNorm and the FFN give the same result on each position alone, and the residual adds a position's own "
    "vectors; only attention's weighted sum mixes positions.":
        "LayerNorm 和 FFN 对单个位置单独计算，结果不变；残差只加上本位置自己的向量。只有注意力的加权求和把各位置混在一起。",
    "d_ff is the FFN's inner width only: down_proj brings every position back to d_model, so layers stack.":
        "d_ff 只是 FFN 内部的宽度：down_proj 把每个位置变回 d_model，层才能一层层堆叠。",
    "The causal mask lets position t see positions 0..t only, so a token appended later changes none of the "
    "earlier rows: this is why their K and V can be kept in a cache.":
        "因果掩码让位置 t 只看到位置 0..t，后来追加的 token 改变不了前面任何一行。正因如此，前面位置的 K 和 V 可以存进缓存。",
})

ZH_OUTPUTS.update({  # -- nb01 -- the tokenization table's header (lib.tokenization.token_table)
    "characters": "字符数", "UTF-8 bytes": "UTF-8 字节数", "lab": "本课程",
})
ZH_PRINTED.update({  # -- nb0204 -- the one-sentence "why" of 02's and 04's prediction and question answers
    "One pass per new token, <eos> included: 4 characters + <eos> = 5 passes.":
        "每个新 token 一次前向传播，<eos> 也算：4 个字加 <eos>，共 5 次。",
    "Step t recomputes all t + 1 positions: 1 + 2 + ... + {0} = {1} x {2} / 2; x {3} layers = {4} in all.":
        "第 t 步要重算全部 t + 1 个位置：1 + 2 + ... + {0} = {1} × {2} / 2；再乘以 {3} 层，共 {4} 个。",
    "The prefill feeds <s>深 and chooses 度; then one pass for each of 学, 习 and <eos>.":
        "预填充送入 <s>深，选出“度”；之后“学”“习”和 <eos> 各要一次。",
    "Without a cache step t computes t + 1 of them (1 + 2 + 3 + 4 + 5); with it, one per step.":
        "没有缓存时，第 t 步算 t + 1 个（1 + 2 + 3 + 4 + 5）；有缓存时，每步一个。",
    "Position i predicts token i + 1: the position of 度 predicts what follows 深度.":
        "位置 i 预测第 i + 1 个 token：“度”所在的位置预测的是“深度”后面的字。",
    "The last new token is never fed back, so the longest pass sees 60 + 5 - 1 = 64 positions.":
        "最后一个新 token 不会送回模型，所以最长的一次前向传播看到 60 + 5 - 1 = 64 个位置。",
    "The cache removes recomputation, not the chain: every new token still needs its own pass.":
        "缓存省掉的是重复计算，不是那条链：每个新 token 仍要单独做一次前向传播。",
    "With one candidate left there is nothing to draw: top_k=1 is greedy decoding.":
        "只剩一个候选，就没有什么可抽：top_k=1 就是贪心解码。",
    "Without a cache the last step feeds all 512 positions: the same computation as the parallel pass.":
        "没有缓存时，最后一步要送入全部 512 个位置：和那次并行前向传播是同一个计算。",
    "5 positions x 2 layers x (K + V) x 4 numbers = 80 numbers of 4 bytes. lib.generate's cache reserved 8 "
    "positions (512 bytes) up front, its cache_bytes column.":
        "5 个位置 × 2 层 × (K + V) × 4 个数 = 80 个数，每个 4 字节。lib.generate 的缓存一开始就预留了 8 个位置"
        "（512 字节），也就是它的 cache_bytes 列。",
    "At batch 1 a step reads the {0} GB of weights once and {1} GB of K/V: mostly weights, not the cache.":
        "批次为 1 时，一步把 {0} GB 权重读一遍，另读 {1} GB 的 K/V：读的主要是权重，不是缓存。",
    "The prefill feeds both prompt tokens at once, then one pass per new token; the cache holds every position "
    "fed, and <eos> is never fed.":
        "预填充一次送入两个提示词 token，之后每个新 token 一次前向传播；缓存存下每个送入过的位置，而 <eos> 从不送入。",
    "Each request reads {0} GB of cache per step; the weights read per step are {1} GB.":
        "每个请求每步读 {0} GB 缓存；每步读取的权重是 {1} GB。",
    "The weights are read once for all 64 requests, and 2 tokens of K/V are next to nothing: about 64 "
    "multiply-adds per 2-byte weight.":
        "权重只读一次，供 64 个请求共用；2 个 token 的 K/V 几乎可以忽略：每个 2 字节的权重约做 64 次乘加。",
    "The causal mask keeps later tokens out of a token's K and V, and the weights do not change during "
    "generation: nothing a later step does can alter a stored row.":
        "因果掩码让后面的 token 进不了一个 token 的 K 和 V，生成时权重也不变：之后的任何一步都改不了已存的行。",
    "Each request brings its own K/V bytes with its FLOPs: at 4096 tokens the step stays under {0} FLOP/byte, "
    "far below the H100's ridge ({1}).":
        "每个请求带来 FLOPs 的同时，也带来它自己的 K/V 字节：4096 token 时这一步始终低于 {0} FLOP/字节，"
        "远低于 H100 的脊点（{1}）。",
})
ZH_PRINTED.update({  # -- nb03 -- 03's predictions and questions (the why of each reveal), its cache picture
    "K and V of each layer: {0}; one decode step appends {1} to each, in all {2} layers: {3:,} bytes per token ({4})":
        "每层的 K 和 V：{0}；每个解码步往两者各追加 {1}，{2} 层都是如此：每个 token {3} 字节（{4}）",
    'Step t feeds all t + 1 tokens again: 1 + 2 + 3 + 4 + 5 = 15 K/V per layer, of which only 5 are new.':
        '第 t 步要把 t + 1 个 token 全部重新送入：每层 1 + 2 + 3 + 4 + 5 = 15 个 K/V，其中只有 5 个是新的。',
    'Every distance between two positions stays the same, and RoPE scores depend only on distances.':
        '任意两个位置相隔多远都没变，而 RoPE 的分数只取决于相隔多远。',
    'Without a cache a step has t queries over t(t+1)/2 query-key pairs: attention grows like t², so doubling t costs almost 4× (a lower-order term keeps it just under).':
        '不用缓存时，一步有 t 个查询、t(t+1)/2 个查询-键对：注意力按 t² 增长，t 翻倍就接近 4 倍（低阶项让它略低一点）。',
    'The copies add up to n(n+1)/2 positions: 136 ÷ 36 ≈ 3.8, near the 4 of a quadratic, while the in-place writes only double.':
        '复制量累计为 n(n+1)/2 个位置：136 ÷ 36 ≈ 3.8，接近平方增长的 4 倍；原地写入只翻一倍。',
    'Without a cache the steps feed 2, 3, 4 and 5 tokens (14); with one, the prefill computes 2 and each step 1 more (5).':
        '不用缓存时，各步分别送入 2、3、4、5 个 token（共 14 个）；用缓存时，预填充算 2 个，之后每步 1 个（共 5 个）。',
    '1 + 2 + … + 40 = 820 positions copied, times per_token bytes.':
        '共复制 1 + 2 + … + 40 = 820 个位置，再乘以 per_token 字节。',
    't queries see t(t+1)/2 query-key pairs, one query sees t: the ratio is (t + 1) / 2 = 500.5.':
        't 个查询看到 t(t+1)/2 个查询-键对，一个查询只看到 t 个：比值为 (t + 1) / 2 = 500.5。',
    'In a previous-token head the query at position p looks mostly at position p − 1.':
        '在前一个 token 头里，位置 p 的查询主要看位置 p − 1。',
    "(b): a position's K and V come from the tokens up to it, and the causal mask keeps later tokens out; the cache is not in state_dict() (a), and (c), (d) say nothing about order in time.":
        '（b）：一个位置的 K 和 V 只由它及之前的 token 算出，因果掩码把后面的 token 排除在外。缓存并不在 state_dict() 里（a）；（c）和（d）与时间先后无关。',
    'False: each new query still reads every cached key, so attention adds up to about n²/2 query-key pairs over a generation (section 6); what becomes linear is the number of K/V computations.':
        '错（False）：每个新查询仍要读所有缓存的键，所以整次生成的注意力累计约 n²/2 个查询-键对（第 6 节）。变成线性的是 K/V 的计算次数。',
    'One token is 2 (K and V) × 4 layers × 4 KV heads × 64 numbers × 2 bytes = 4,096 bytes; 512 tokens take 2 MiB.':
        '一个 token 占 2（K 和 V）× 4 层 × 4 个 KV 头 × 64 个数 × 2 字节 = 4,096 字节；512 个 token 占 2 MiB。',
})
ZH_OUTPUTS.update({  # -- nb0506 -- notebooks 05 and 06: what the answer cells of predictions and questions say
    # 05
    "KiB per token": "每个 token 的 KiB 数",
    "2 (K and V) × 32 layers × 32 KV heads × 128 numbers × 2 bytes = 524,288 bytes.":
        "2（K 和 V）× 32 层 × 32 个 KV 头 × 128 个数 × 2 字节 = 524,288 字节。",
    "GiB of fp16 weights": "fp16 权重的 GiB 数",
    "6,738,415,616 parameters × 2 bytes = 13.48 GB, and 13.48 GB is 12.55 GiB.":
        "6,738,415,616 个参数 × 2 字节 = 13.48 GB，而 13.48 GB 就是 12.55 GiB。",
    "fp32 / int8": "fp32 与 int8 之比",
    "A vector of 64 numbers takes 256 bytes in fp32, and 64 bytes plus a 4-byte scale in int8: 256 / 68.":
        "64 个数的向量在 fp32 下占 256 字节，在 int8 下占 64 字节，外加 4 字节的缩放因子：256 / 68。",
    "requests running": "同时运行的请求数",
    "The pool has {n} blocks; block 0 is vLLM's null block, and each request needs 8,192 / 16 = 512 blocks: "
    "{usable:,} // 512.":
        "块池共有 {n} 个块，其中 0 号块是 vLLM 的空块（null block）。每个请求要 8,192 / 16 = 512 个块：{usable:,} // 512。",
    "Each request holds 8,192 × 128 KiB = 1 GiB, and 40 GiB less 14.96 GiB of weights leaves room for 25.":
        "每个请求占 8,192 × 128 KiB = 1 GiB。40 GiB 减去 14.96 GiB 的权重，剩下的只够 25 个。",
    "tokens per request": "每个请求的 token 数",
    "Weights in memory / (4 requests × 800 KiB per token); that is past the model's 4,096-token window.":
        "显存中的权重 /（4 个请求 × 每个 token 800 KiB）。这已经超出了模型 4,096 个 token 的窗口。",
    "Each query head still multiplies its own query by every key; only the K/V that are stored and read shrink, "
    "since the repeat happens after the read.":
        "每个查询头仍要拿自己的查询去乘每个键。变少的只是存下和读出的 K/V，因为复制发生在读出之后。",
    "The KV block pool is allocated at start-up from what the weights and the activations reserve leave of 92% of "
    "the memory; requests only take blocks from it.":
        "KV 块池在启动时就分配好了：92% 的显存减去权重和激活预留，剩下的全给它。请求只是从池里取块。",
    "An average hides single near-ties: where the two best tokens are closer than the rounding moves them, greedy "
    "picks the other one and feeds it back.":
        "平均值掩盖了个别的近似平局：两个最佳 token 相差不到舍入带来的偏移时，贪心解码就会选中另一个，并把它送回模型。",
    # 06
    "Each 2-byte weight is used for one multiply-add, 2 FLOPs: about 1 FLOP per byte.":
        "每个 2 字节的权重只参与一次乘加，即 2 个 FLOP：大约每字节 1 个 FLOP。",
    "It is memory-bound: bytes / bandwidth = 14.29 GB / 3.35 TB/s; the FLOPs would take far less.":
        "它是访存受限的：字节数 / 带宽 = 14.29 GB / 3.35 TB/s；算那些 FLOPs 用的时间要少得多。",
    "Its ceiling F / k is {c} FLOP/byte, below the ridge of {r}: the KV bytes grow with the batch.":
        "它的上限 F / k 是 {c} FLOP/字节，低于脊点 {r}：KV 字节数随批次一起增长。",
    "Count as in section 1 with context = 16: the KV read grows to 16 tokens, the weights read stay 4,080 bytes.":
        "按第 1 节的方法数，上下文取 16：KV 读取增加到 16 个 token，读取的权重仍是 4,080 字节。",
    "H100 time / H200 time": "H100 耗时 / H200 耗时",
    "Decode is memory-bound, so its time scales with bandwidth alone: 4.8 / 3.35.":
        "解码是访存受限的，耗时只随带宽变化：4.8 / 3.35。",
    "At long context the ceiling tends to n_heads / n_kv_heads: 28 / 4 = 7 for qwen2.5-7b, the most query heads per "
    "KV head.": "长上下文下，上限趋近 n_heads / n_kv_heads。qwen2.5-7b 是 28 / 4 = 7，每个 KV 头配的查询头最多。",
    "The smallest t with 16 · t · KV bytes per token > the weights read per step; it is inside the window.":
        "满足 16 · t · 每个 token 的 KV 字节数 > 每步读取的权重的最小 t；它在窗口之内。",
    "Verification runs k + 1 queries over the same cached bytes; a bigger batch adds bytes in step with FLOPs, and a "
    "GPU moves the ridge, not the intensity.":
        "验证让 k + 1 个查询读同一批缓存字节。批次变大时，字节数和 FLOPs 同步增长；换 GPU 移动的是脊点，不是强度。",
    "The KV reads are only {s} of the bytes; the 13.21 GB of weights are read in full for one token, and activations "
    "are not counted.": "KV 读取只占字节数的 {s}。为了一个 token，13.21 GB 的权重要完整读一遍；激活值不计入。",
    "A prefill is compute-bound, and both GPUs have the same 989.4 TFLOP/s: more bandwidth does not speed it up.":
        "预填充是计算受限的，两块 GPU 的算力都是 989.4 TFLOP/s：带宽再高也快不了。",
})

ZH_OUTPUTS.update({  # -- nb0506 -- lib.hf.load_from_env's messages (05 and 13: bring your own model; how_to())
    "No model of your own is loaded: the environment variable {var} is not set.":
        "没有加载你自己的模型：环境变量 {var} 没有设置。",
    "To watch a real model's KV cache here:": "想在这里观察一个真实模型的 KV 缓存：",
    "  1. install the optional extra:  {command}  (or: {plain})": "  1. 安装可选依赖：  {command}（或：{plain}）",
    "  2. put a checkpoint folder on disk (config.json + *.safetensors + tokenizer files) of a":
        "  2. 在磁盘上准备一个 checkpoint 文件夹（config.json + *.safetensors + tokenizer 文件），模型类型为",
    "     {kinds}, e.g. gpt2 or Qwen/Qwen2.5-0.5B;": "     {kinds} 之一，例如 gpt2 或 Qwen/Qwen2.5-0.5B；",
    "  3. start JupyterLab with  {var}=/path/to/that/folder  and run this notebook again.":
        "  3. 用  {var}=/path/to/that/folder  启动 JupyterLab，再运行一遍这个笔记本。",
    "{var}={path} is set, but {error}": "已设置 {var}={path}，但{error}",
    "{var}={path} could not be loaded: {error}": "{var}={path} 无法加载：{error}",
    "loaded {path}: {layers} layers, d_model {d_model}, {heads} heads ({kind}, {kv_heads} KV heads), "
    "{params:,} parameters, {dtype}, {tokenizer}":
        "已加载 {path}：{layers} 层，d_model {d_model}，{heads} 个头（{kind}，{kv_heads} 个 KV 头），"
        "{params:,} 个参数，{dtype}，{tokenizer}",
})
ZH_PRINTED.update({  # -- nb0506 -- lines printed by notebook 05's cells
    "llama-2-70b on the H200: {0} of weights; {1} left for KV = {2} blocks = {3} tokens":
        "llama-2-70b 在 H200 上：权重 {0}；留给 KV 的 {1} = {2} 个块 = {3} 个 token",
    "vLLM starts with max_model_len=4096": "vLLM 能以 max_model_len=4096 启动",
    "one request of 4,096 tokens needs {0} blocks: vLLM refuses max_model_len=4096":
        "一个 4,096 token 的请求要 {0} 个块：vLLM 拒绝以 max_model_len=4096 启动",
})
ZH_OUTPUTS.update({  # -- nb0910 -- notebook 10: the scheduler-step exercise, chunked prefill, TTFT / TPOT
    "One step of a continuous-batching scheduler": "连续批处理调度器的一步",
    "first admit from the front of the queue while the head's length + 1 positions fit in free blocks (stop at "
    "the first that does not); then give every request that was running one more position, taking a block when "
    "length % block_size == 0; when none is free, pop the last running request, put its blocks back on the free "
    "list and it at the front of the queue, and try again.":
        "先从队首接纳：队首请求的 length + 1 个位置放得进空闲块，就接纳它；第一个放不下的请求一出现就停下。"
        "然后让原先在运行的每个请求多占一个位置：length % block_size == 0 时要取一个新块。"
        "没有空闲块时，弹出最后一个运行中的请求，把它的块还给空闲列表，把它放回队首，再试一次。",
    "{what} (blocks of {size}, {n_free} free)": "{what}（块大小 {size}，空闲 {n_free} 块）",
    "an empty queue: every running request grows": "队列为空：每个运行中的请求都增长一个 token",
    "growth across a block boundary": "增长跨过块边界",
    "admission limited by blocks, first come first served": "接纳受块数限制，先来先服务",
    "the head of the queue does not fit, a shorter request behind it would":
        "队首请求放不下，排在它后面的短请求本来放得下",
    "a preemption: a block is needed and none is free": "抢占：需要一个块，却没有空闲块",
    "the request that needs the block is itself the most recently admitted": "需要新块的请求恰好是最近接纳的那个",
    "return the three lists (running, waiting, free), got {got}": "应返回三个列表 (running, waiting, free)，得到的是 {got}",
    "running": "运行中", "waiting": "等待中",
    "every request in {what} must stay a dict with the keys rid, length and blocks":
        "{what}中的每个请求都应是含 rid、length、blocks 三个键的 dict",
    "the order of the running requests (rids)": "运行中请求的顺序（rid）",
    "the order of the waiting queue (rids)": "等待队列的顺序（rid）",
    "the length of running request {rid}": "运行中请求 {rid} 的长度",
    "the length of waiting request {rid}": "等待中请求 {rid} 的长度",
    "running request {rid} holds {got} blocks for its {length} positions: a block holds block_size positions, and a "
    "request takes a new one only when its last is full":
        "运行中的请求 {rid} 用 {got} 个块放 {length} 个位置。一个块放 block_size 个位置，最后一块满了才取新块",
    "running request {rid}'s old blocks changed: a request keeps its blocks and appends new ones at the end":
        "运行中的请求 {rid} 原有的块变了。请求保留已有的块，新块只追加在末尾",
    "waiting request {rid} still holds blocks: a preempted request (recompute) gives all of them back":
        "等待中的请求 {rid} 还占着块。被抢占的请求（重计算）要把块全部还回去",
    "the blocks do not add up: every block of the pool must be in exactly one running request's table or in the "
    "free list (a block lost, or counted twice)":
        "块数对不上：池中每个块要么恰好在一个运行中请求的块表里，要么在空闲列表里（有块丢了，或被算了两次）",
    "{n} blocks are free after your step, which is not the expected number": "你的这一步之后有 {n} 个空闲块，与预期的数目不符",
    # chunked prefill and latency tables
    "token budget": "token 预算", "longest pass with decodes (ms)": "含解码的最长一次前向传播（ms）",
    "whole run (ms)": "整次运行（ms）", "TTFT (ms)": "首 token 延迟 TTFT（ms）",
    "TPOT (ms)": "每个输出 token 的延迟 TPOT（ms）", "TTFT / TPOT": "TTFT / TPOT 之比", "prefill bound": "预填充受限于",
    "decode bound": "解码受限于",
    "its first token (pass)": "它的首 token（第几次前向传播）", "its first token (ms)": "它的首 token（ms）",
    # the why of the predictions and questions of notebooks 09 and 10
    "5 positions need 2 blocks of 4, so 5 of the 8 slots hold tokens; only the last block has empty slots.":
        "5 个位置要 2 个大小为 4 的块，8 个槽位里有 5 个存着 token；只有最后一块有空槽位。",
    "the first child computes all 15; each other finds the 3 full blocks (12 tokens) and computes the last 3 again: "
    "15 + 3 × 3.": "第一个子请求算全部 15 个；其余每个找到 3 个写满的块（12 个 token），再重算最后 3 个：15 + 3 × 3。",
    "the fork shares all 4 blocks; the 3 full ones stay shared and the last one (3 of its 4 positions filled) is "
    "copied by 3 of its 4 holders (the last writes in place).":
        "分叉共享全部 4 个块；3 个写满的块保持共享，最后一块（4 个位置写了 3 个）由 4 个持有者中的 3 个各复制一份（最后一个原地写入）。",
    "attention reads the same keys and values either way (the gather even adds work); paging saves memory, so more "
    "requests fit in a batch.": "两种缓存下注意力读的键和值一样多（收集还多了一点工作）；分页省的是显存，让一个批次放得下更多请求。",
    "only full blocks are indexed: positions 0-7 fill two blocks; the third block of P holds 2 tokens and could still "
    "change.": "只有写满的块才建索引：位置 0-7 填满两块；P 的第三块只有 2 个 token，内容还可能变。",
    "a block's contents are fixed only once it is full; before that the next write would change a block other "
    "requests rely on.": "块写满后内容才固定；在那之前，下一次写入会改动别的请求依赖的块。",
    "every request reserves 2048 positions however short its answer: 16,384 / 2048 = 8.":
        "不管回答多短，每个请求都预留 2048 个位置：16,384 / 2048 = 8。",
    "a decode step reads all 26 GB of weights for one token; the prefill reads them once for 448 tokens, and their "
    "FLOPs take only about 1.5 times as long as that read.":
        "一步解码为一个 token 读一遍全部 26 GB 权重；预填充读一遍权重处理 448 个 token，这些计算的用时只是那次读取的约 1.5 倍。",
    "the newest request has made the fewest tokens, so recomputing it loses the least, and first come, first served "
    "stays fair.": "最新的请求生成的 token 最少，重计算它损失最小，先来先服务也保持公平。",
    "both give the model the same keys and values for the same tokens; they differ only in what bringing them back "
    "costs.": "两者让模型对同样的 token 拿到同样的键和值；区别只在把它们找回来的代价。",
    "below the ridge a pass costs the weight read; the chunk's FLOPs fit inside it until the tokens of a step approach "
    "the ridge intensity.": "在脊点以下，一次前向传播的代价就是读权重的时间；只要一步的 token 数还没接近脊点强度，分块的计算都藏在这次读取里。",
    "lm, measured here": "lm，在这台机器上实测", "llama-2-13b, H100": "llama-2-13b，在 H100 上", "lm, H100": "lm，在 H100 上",
})

ZH_PRINTED.update({  # -- nb0910 -- lines printed by notebook 10's new cells
    "every token budget gives every request the same tokens": "每种 token 预算下，每个请求得到的 token 都相同",
})
ZH_OUTPUTS.update({  # -- nb1113 -- the answers (lib.exercises.reveal's why) of notebooks 11, 12 and 13
    # 13 · the vLLM bridge
    "A Llama-3-8B token costs a quarter of the bytes (8 KV heads instead of 32); its larger weights leave a little "
    "less memory, so slightly under 4x.":
        "Llama-3-8B 的每个 token 只占四分之一的字节（8 个 KV 头而不是 32 个）；它的权重大一些，留下的显存略少，所以略低于 4 倍。",
    "Memory the cache cannot have costs blocks one for one: 4 GiB / 2 MiB = 2,048. The block size only decides how "
    "finely the memory is cut; fp8 halves a block, so twice the tokens.":
        "缓存用不上的显存会一比一地吃掉块：4 GiB / 2 MiB = 2,048。块大小只决定显存切得多细；fp8 让一块减半，所以 token 翻倍。",
    "The V1 engine preempts by recomputation only; KV offloading, when on, is a second tier of the prefix cache, not "
    "the paper's swap.":
        "V1 引擎只用重计算来抢占；KV 卸载即使打开，也只是前缀缓存的第二层，不是论文里的换出。",
    "It counts requests of the full max_model_len; blocks are handed out as sequences grow, so shorter requests run "
    "many more at once, up to max_num_seqs.":
        "它按满长度 max_model_len 的请求来算；块是随序列增长才分出去的，所以短请求能同时跑得多得多，上限是 max_num_seqs。",
    "One block is 2 × layers × KV heads × head_dim × 16 tokens × 1 byte = {block}; the available memory divided by "
    "it, rounded down.":
        "一块是 2 × 层数 × KV 头数 × head_dim × 16 个 token × 1 字节 = {block}；用可用显存除以它，向下取整。",
    "32 × 8,192 tokens need {kv} of cache beside {w} of weights: {need} of {total} is {frac}, and the next hundredth "
    "up is the answer.":
        "32 × 8,192 个 token 需要 {kv} 缓存，另有 {w} 权重：{need} 占 {total} 的 {frac}，往上取到下一个百分位就是答案。",
    "vLLM counts its {n:,} blocks as requests of {per} blocks ({pos:,} positions for 1,024 tokens): {n:,} / {per} × "
    "1,024 = {rep:,}, less than {n:,} × 48 = {all:,}.":
        "vLLM 把 {n:,} 个块按每个请求 {per} 块来算（1,024 个 token 占 {pos:,} 个位置）：{n:,} / {per} × 1,024 = {rep:,}，"
        "比 {n:,} × 48 = {all:,} 少。",
})

ZH_OUTPUTS.update({  # -- nb1113 -- 11 · FlashAttention: the answers of its predictions and questions
    "S and P hold T × T numbers per head and each crosses twice; Q, K, V and O hold only T × D, and D = 128 is small "
    "beside T = 4096.":
        "S 和 P 每个头都有 T × T 个数，各搬两次；Q、K、V、O 只有 T × D 个数，而 D = 128 比 T = 4096 小得多。",
    "In layer 0, on this held-out text, most of the query's weight goes to the recent positions: the newest chunk "
    "holds {share} of the softmax, averaged over the heads.":
        "在这段留出文本上，第 0 层查询的权重大多落在最近的位置：按各头平均，最新一段占了 softmax 的 {share}。",
    "A decode step reads every cached key and value once, flash or not; flash removes the T × T scores, which a "
    "single query does not have.":
        "用不用 flash，解码步都要把缓存的每个键和值读一遍；flash 省掉的是 T × T 的分数，而单个查询本来就没有它。",
    "Each query tile reads every key tile up to the diagonal, so twice the queries per tile means half the re-reads "
    "of K and V: at 4,096 tokens {b64} with tiles of 64, {b128} with 128.":
        "每个查询分块都要读到对角线为止的所有键分块，所以一个分块的查询翻倍，K 和 V 的重读就减半：4,096 个 token 时，"
        "分块 64 搬 {b64}，分块 128 搬 {b128}。",
    "heads × T × T scores of 2 bytes each: 64 × 8,192 × 8,192 × 2 = {b}, whatever head_dim is.":
        "头数 × T × T 个分数，每个 2 字节：64 × 8,192 × 8,192 × 2 = {b}，与 head_dim 无关。",
    "10 × 10 tiles: the 10 on the diagonal and the 45 below it are computed, the 45 above it are skipped.":
        "共 10 × 10 个分块：对角线上的 10 个和它下方的 45 个要计算，上方的 45 个被跳过。",
    "ceil(1000 / 64) = 16: 15 full chunks and a last one of 40 positions; any chunk size gives the same output.":
        "ceil(1000 / 64) = 16：15 个满段，最后一段 40 个位置；段长取多少，输出都一样。",
})

ZH_PRINTED.update({  # -- nb1113 -- lines that 11's cells print
    "Q, K, V and O: {0};  S and P, written and read back: {1}": "Q、K、V 和 O：{0}；  S 和 P 写出再读回：{1}",
})

ZH_OUTPUTS.update({  # -- nb1113 -- 12 · sliding window: the answers of its predictions and questions
    "Position p goes to slot p mod W: 11 mod 8 = 3, over position 3, which no later query can see.":
        "位置 p 放进槽位 p mod W：11 mod 8 = 3，覆盖掉位置 3，之后的查询再也看不到它。",
    "The ring holds W = 8 positions per layer, the full cache all 64: 64 / 8. The ring's bytes are allocated once, "
    "so it is larger than the full cache for the first 7 tokens.":
        "环每层保存 W = 8 个位置，完整缓存保存全部 64 个：64 / 8。环的字节一次分配好，所以前 7 个 token 时它反而比完整缓存大。",
    "One head of the toy gives <s> more than half its weight, ten times an even share; no head of lm gives it more "
    "than a few hundredths, in either language.":
        "玩具模型有一个头把一半以上的权重给了 <s>，是平均份额的十倍；lm 在两种语言上都没有哪个头给它超过百分之几。",
    "Each layer passes on what it saw W − 1 positions back, so 32 layers reach about 32 × 4,095 = {reach:,} "
    "positions: position 0 arrives indirectly; a sink would let every layer see it directly.":
        "每一层都把往回 W − 1 个位置看到的东西传下去，所以 32 层大约能覆盖 32 × 4,095 = {reach:,} 个位置："
        "位置 0 的信息能间接传到；汇点则让每一层都能直接看到它。",
    "The sinks take {n} of the W = {w} slots: the same memory, {r} slots left for recent text, which is why 4 sinks "
    "made the English perplexity worse.":
        "汇点占用 W = {w} 个槽位中的 {n} 个：内存不变，留给最近文本的只剩 {r} 个槽位，所以 4 个汇点让英文困惑度变差了。",
    "A window of 32 costs {p32} of perplexity, 64 only {p64}: this model reads mostly the last few dozen characters.":
        "窗口 32 让困惑度变化 {p32}，窗口 64 只有 {p64}：这个模型主要读最近几十个字符。",
})
ZH_OUTPUTS.update({  # -- nb0708 -- the answers of 07's and 08's predictions and questions (lib.exercises.reveal)
    "the KV cache equals the weights at {tokens} cached tokens, {n} requests of 8,192 tokens: the next whole request "
    "is the first to exceed them (8 KV heads instead of 32 push the crossover out)":
        "缓存到 {tokens} 个 token 时，KV 缓存与权重相等，即 {n} 个 8,192 token 的请求。再多一个整请求就超过了。"
        "（只有 8 个 KV 头而不是 32 个，交叉点被推远了。）",
    "one causal pass gives the logits of every position at once, and they are the cached steps' logits: the "
    "pass's row i is the prediction after tokens 0 … i, as in step i − 1 of the trace":
        "一次因果前向传播同时给出每个位置的 logits，它们就是带缓存各步的 logits："
        "第 i 行是 token 0 … i 之后的预测，对应 trace 的第 i − 1 步。",
    "the cached keys and values are the old weights' projections of the text; with new weights every one of them "
    "changes, so the cache must be computed again (it is state of the request, made from weights and text)":
        "缓存里的键和值是旧权重对文本的投影。权重一变，它们全都会变，缓存只能重算。"
        "（缓存是请求的状态，由权重和文本算出。）",
    "the weights shrink by half and each request's cache does not: {fp16} requests in fp16, {int8} with int8 "
    "weights; quantizing the weights leaves more room, and the KV cache becomes the larger share of it sooner":
        "权重减半，每个请求的缓存却不变：fp16 时是 {fp16} 个请求，int8 权重时是 {int8} 个。"
        "量化权重腾出了空间，KV 缓存也更早成为显存的大头。",
    "round 1 keeps both drafts 度学 and adds the bonus 习; round 2 keeps <eos>, and the text ends: 4 tokens "
    "in 2 passes, where the target alone needs 4":
        "第 1 轮保留两个草稿“度学”，再补上额外 token“习”；第 2 轮保留 <eos>，文本结束。"
        "2 次前向传播得到 4 个 token，只用目标模型要 4 次。",
    "keep with min(1, p/q) = 0.4 / 0.7; the residual max(0, p − q) = (0.3, 0) holds only token 0, the one "
    "the draft proposes too rarely":
        "保留的概率是 min(1, p/q) = 0.4 / 0.7。剩余分布 max(0, p − q) = (0.3, 0) 只剩 token 0，"
        "也就是草稿模型提得太少的那个。",
    "every round still ends in the target's own token (here always a correction): never fewer tokens per target "
    "pass than the target alone, only the draft's passes are wasted":
        "每轮最后都有目标模型自己的 token（这里总是修正）。所以每次目标前向传播产出的 token 不会少于单用目标模型，"
        "白费的只是草稿模型的前向传播。",
    "once a pass is compute-bound, checking k + 1 tokens costs about k + 1 times the arithmetic, so the rejected "
    "guesses are paid in full; (a) is memory-bound, the best case, and (c) makes c small":
        "前向传播一旦计算受限，检查 k + 1 个 token 就要约 k + 1 倍的运算，被拒绝的猜测得全额买单。"
        "（a）访存受限，是最好的情形；（c）让 c 很小。",
    "the min(1, p/q) rule and the residual give exactly p for any draft q (the chi-square test found no "
    "difference even with the untrained draft): a worse draft costs passes, never quality":
        "对任意草稿分布 q，min(1, p/q) 规则加上剩余分布给出的都正好是 p。"
        "（换成未训练的草稿模型，χ² 检验也找不出差别。）差的草稿模型只多花前向传播，不降低质量。",
})

ZH_PRINTED.update({  # -- nb0708 -- values and lines 08 prints
    "English passages": "英文段落", "Chinese poems": "中文诗",
    "greedy, {0} held-out {1}:": "贪心，留出的{1}，共 {0} 段：",
    "temperature 1, {0} held-out {1}:": "温度 1，留出的{1}，共 {0} 段：",
    "separated: every run of {0} is faster ({1} vs {2})": "分得开：{0} 的每次运行都更快（{1} 对 {2}）",
    "not separated after {0} and {1} runs: the ranges overlap ({2} vs {3})":
        "{0} 次和 {1} 次运行后仍分不开：两者的范围重叠（{2} 对 {3}）",
    "chi-square = {0} with {1} degrees of freedom over {2} samples, p-value {3}":
        "χ² = {0}，自由度 {1}，共 {2} 个样本，p 值 {3}",
    "{0} runs: {1}/{2} proposals kept ({3}), {4} tokens in {5} target passes; {6}":  # DistributionCheck.summary
        "{0} 次运行，{2} 个提议中 {1} 个被接受（{3}），目标模型 {5} 次前向传播得到 {4} 个 token；{6}",
})

ZH_OUTPUTS.update({  # -- nb12 (issue 32) -- 12's tables and answers on a model that reads its context
    "written twice": "写两遍的内容", "first copy": "第一遍", "second copy": "第二遍", "second / first": "第二遍 / 第一遍",
    "100 random letters": "100 个随机字母", "the last 128 characters": "最后 128 个字符", "new text": "新文本",
    "the opening again": "开头再现", "bits/char before them": "之前的每字符比特数",
    "bits/char on them": "这些字符的每字符比特数", "on them vs full cache": "这些字符 vs 完整缓存",
    "nbytes before": "之前的 nbytes", "nbytes after": "之后的 nbytes", "scored positions": "打分的位置数",
    "cache bytes": "缓存字节数", "a full cache": "完整缓存需要",
    "Gu et al.'s bar is 0.3 of a head's weight on position 0; the most any head of lm from layer 1 on gives it is "
    "{en} in English and {zh} in Chinese.":
        "Gu 等的门槛是一个头把 0.3 的权重给位置 0；lm 从第 1 层起给得最多的头，英文是 {en}，中文是 {zh}。",
    "The sinks take {n} of the W = {w} slots: the same memory, {r} slots left for recent text.":
        "汇点占去 W = {w} 个槽位中的 {n} 个：内存不变，留给近处文本的只剩 {r} 个槽位。",
    "On plain text a window of 32 costs {p32} of perplexity, 64 costs {p64}; section 5 showed what a window costs "
    "on text that comes back.":
        "在普通文本上，窗口 32 让困惑度变化 {p32}，窗口 64 变化 {p64}；窗口在文本再次出现时的代价见第 5 节。",
})

ZH_PRINTED.update({  # -- nb12 (issue 32) -- lines 12's cells print
    "bits per character on each copy (the first character of each copy left out)":
        "每一遍的每字符比特数（每一遍的第一个字符不计）",
    "held-out {0} passages, {1} characters": "留出的 {0} 段落，{1} 个字符",
    "measured on held-out passages written twice: layer {0}, head {1}, {2} (the same head as on random letters)":
        "在写了两遍的留出段落上测得：第 {0} 层，第 {1} 头，{2}（与随机字母上测得的是同一个头）",
    "measured on held-out passages written twice: layer {0}, head {1}, {2} (another head as on random letters)":
        "在写了两遍的留出段落上测得：第 {0} 层，第 {1} 头，{2}（与随机字母上测得的不是同一个头）",
    "the induction head: layer {0}, head {1}, {2} of its weight on the letter after the earlier occurrence":
        "归纳头：第 {0} 层，第 {1} 头，把 {2} 的权重放在上一次出现之后的那个字母上",
    "lm, held-out text: the weight on position 0 from queries at positions 64 and later, per head (an even spread "
    "would give {0})": "lm，留出文本：位置 64 及以后的查询分给位置 0 的权重，按头列出（平均分配时为 {0}）",
    "chat (toy), its own run: layer {0}, head {1} gives <s> {2} of its weight (an even spread would give {3})":
        "chat（玩具模型），它自己生成的序列：第 {0} 层第 {1} 头把 {2} 的权重给了 <s>（平均分配时为 {3}）",
    "positions in the text: a prompt of {0} tokens leaves room for at most {1} new token(s) in the context window "
    "(max_seq_len={2}), but max_new_tokens={3}":
        "位置按文本计数：{0} 个 token 的提示词在上下文窗口（max_seq_len={2}）里最多只留得下 {1} 个新 token，"
        "但 max_new_tokens={3}",
    "positions within the cache: {0} tokens, {1} times the context window; the next query sits at position {2} of "
    "the cache": "位置在缓存内部编号：共 {0} 个 token，是上下文窗口的 {1} 倍；下一个查询位于缓存的位置 {2}",
    "the last 160 characters: {0}": "最后 160 个字符：{0}",
})
