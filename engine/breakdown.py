"""A model's sizes, each with the formula and the numbers behind it (the page's "model breakdown").

Parameters (total and active), weight bytes, KV cache bytes per token and at
a context, and the FLOPs of one decode token, split into attention
projections, MLP, LM head and attention scores. Every value comes from
:class:`engine.models.ModelConfig` and :func:`engine.cost.causal_pairs`, the
same counting the labs use, so the breakdown and the labs cannot disagree.
Formulas: the JAX scaling book (transformers.md: 2 FLOPs per weight per
token, 4 x heads x head_dim per (query, key) pair; inference.md: KV bytes =
2 x layers x kv_heads x head_dim x bytes), DeepSeek-V2 (arXiv 2405.04434) for
the MLA latent.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from engine.cost import causal_pairs
from engine.models import ModelConfig


@dataclass(frozen=True)
class Row:
    """One quantity: its key, a label, the value in ``unit``, and the formula with its numbers."""

    key: str
    label: str
    value: float
    unit: str
    formula: str


def _n(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.4g}"


def _attention_formula(m: ModelConfig) -> str:
    d, H = m.hidden_size, m.num_heads
    if m.is_mla:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = (f"{_n(d)}×{_n(H)}×{_n(qk)} (q)" if m.q_lora_rank is None else
             f"{_n(d)}×{_n(m.q_lora_rank)} (q down) + {_n(m.q_lora_rank)} (its norm) + "
             f"{_n(m.q_lora_rank)}×{_n(H)}×{_n(qk)} (q up)")
        return (f"{q} + {_n(d)}×({_n(m.kv_lora_rank)} + {_n(m.qk_rope_head_dim)}) (latent down) + "
                f"{_n(m.kv_lora_rank)} (its norm) + {_n(m.kv_lora_rank)}×{_n(H)}×({_n(m.qk_nope_head_dim)} + "
                f"{_n(m.v_head_dim)}) (K, V up) + {_n(H)}×{_n(m.v_head_dim)}×{_n(d)} (o)")
    h, K = m.head_dim, m.num_kv_heads
    text = f"{_n(d)}×{_n(H)}×{_n(h)} (q) + 2×{_n(d)}×{_n(K)}×{_n(h)} (k, v) + {_n(H)}×{_n(h)}×{_n(d)} (o)"
    if m.attention_bias:
        text += f" + {_n(H)}×{_n(h)} + 2×{_n(K)}×{_n(h)} (q, k, v biases)"
    if m.qk_norm:
        text += f" + 2×{_n(h)} (q, k norms)"
    return text


def _mlp_rows(m: ModelConfig) -> list[Row]:
    d = m.hidden_size
    dense_layers = m.num_layers - m.num_moe_layers
    rows = []
    if dense_layers:
        rows.append(Row("params_dense_mlp_per_layer", "Dense MLP, one layer", m.dense_mlp_params, "parameters",
                        f"3 (gate, up, down) × {_n(d)} × {_n(m.intermediate_size)}; {_n(dense_layers)} such layers"))
    if m.is_moe:
        size = m.moe_intermediate_size or m.intermediate_size
        rows.append(Row("params_expert", "One expert", m.expert_params, "parameters",
                        f"3 × {_n(d)} × {_n(size)}; {_n(m.num_moe_layers)} MoE layers of {_n(m.num_experts)} "
                        f"routed{f' + {_n(m.num_shared_experts)} shared' if m.num_shared_experts else ''} "
                        f"experts and a {_n(d)}×{_n(m.num_experts)} router"))
    return rows


def model_breakdown(
    model: ModelConfig, context_tokens: int, batch: int = 1,
    bytes_per_param: float = 2.0, kv_bytes_per_element: float = 2.0,
) -> list[Row]:
    """Every size of ``model``, with formulas, for one decode token after ``context_tokens`` cached ones.

    Args:
        model: the architecture.
        context_tokens: tokens already cached (>= 0); the KV and attention rows use it.
        batch: sequences decoding together (>= 1); the MoE rows count the experts they reach.
        bytes_per_param, kv_bytes_per_element: 2 for bf16.

    Returns:
        Rows in reading order: parameters, bytes, KV cache, FLOPs per token.

    Raises:
        ValueError: context_tokens < 0 or batch < 1.
    """
    if context_tokens < 0 or batch < 1:
        raise ValueError("context_tokens must be >= 0 and batch >= 1")
    m, b = model, bytes_per_param
    d, L, V = m.hidden_size, m.num_layers, m.vocab_size
    embed = V * d
    head = 0 if m.tie_word_embeddings else V * d
    norms = L * m.norms_per_layer * d + d
    attn = L * m.attention_params_per_layer
    mlp_total = m.param_count - embed - head - norms - attn
    mlp_active = m.active_param_count - embed - head - norms - attn
    params_formula = (f"{_n(V)}×{_n(d)} (embedding) + "
                      + (f"{_n(V)}×{_n(d)} (LM head) + " if head else "0 (LM head tied to the embedding) + ")
                      + f"{_n(L)} × {_n(m.attention_params_per_layer)} (attention) + {_n(mlp_total)} (MLPs) + "
                      f"{_n(L)}×{m.norms_per_layer}×{_n(d)} + {_n(d)} (norms)")
    rows = [
        Row("params_total", "Parameters, resident (every expert)", m.param_count, "parameters", params_formula),
    ]
    if m.is_moe:
        rows.append(Row(
            "params_active", "Parameters one token uses", m.active_param_count, "parameters",
            f"as above with {_n(m.experts_per_token)} of {_n(m.num_experts)} routed experts per MoE layer: "
            f"MLPs {_n(mlp_active)} instead of {_n(mlp_total)}"))
    rows += [
        Row("params_embedding", "Embedding", embed, "parameters", f"vocab × hidden = {_n(V)} × {_n(d)}"),
        Row("params_attention_per_layer", "Attention projections, one layer", m.attention_params_per_layer,
            "parameters", _attention_formula(m)),
        *_mlp_rows(m),
        Row("weight_bytes", "Weights in memory", m.weight_bytes(b), "bytes",
            f"{_n(m.param_count)} parameters × {_n(b)} bytes" + (" (every expert is resident)" if m.is_moe else "")),
    ]
    if m.is_moe:
        distinct = float(m.expected_distinct_experts(batch))
        E, k = m.num_experts, m.experts_per_token
        rows += [
            Row("experts_read_per_moe_layer", f"Distinct experts one decode step reads (batch {batch})", distinct,
                "experts", f"E × (1 − (1 − k/E)^B) = {_n(E)} × (1 − (1 − {_n(k)}/{_n(E)})^{_n(batch)}), "
                "uniform routing (derived)"),
            Row("weight_bytes_read_per_decode_step", f"Weight bytes one decode step reads (batch {batch})",
                float(m.weights_read_per_step(batch, b)), "bytes",
                f"(resident − {_n(m.num_moe_layers)} × ({_n(E)} − {distinct:,.2f}) × {_n(m.expert_params)}) "
                f"× {_n(b)} bytes"),
        ]
    rows += _kv_rows(m, context_tokens, kv_bytes_per_element)
    rows += _flop_rows(m, context_tokens)
    return rows


def _kv_rows(m: ModelConfig, ctx: int, bkv: float) -> list[Row]:
    per_layer = m.kv_elements_per_token_per_layer
    if m.is_mla:
        elems = (f"kv_lora_rank + qk_rope_head_dim = {_n(m.kv_lora_rank)} + {_n(m.qk_rope_head_dim)} "
                 "(one latent, all heads)")
    else:
        elems = f"2 (K, V) × {_n(m.num_kv_heads)} KV heads × {_n(m.head_dim)} head_dim"
    held = " + ".join(
        f"{_n(layers)} × {_n(per_layer * bkv)} × " + (f"{_n(ctx)}" if w is None else f"min({_n(ctx)}, {_n(w)})")
        for w, layers in m.layer_windows.items()
    )
    return [
        Row("kv_elements_per_token_per_layer", "KV elements per token, one layer", per_layer, "elements", elems),
        Row("kv_bytes_per_token", "KV cache per token", m.kv_bytes_per_token(bkv), "bytes",
            f"{_n(m.num_layers)} layers × {_n(per_layer)} × {_n(bkv)} bytes"),
        Row("kv_bytes_at_context", f"KV cache of one sequence at {ctx:,} tokens",
            float(m.kv_cache_bytes(ctx, bkv)), "bytes",
            f"layers × bytes per token per layer × tokens held: {held}"
            + (" (a sliding-window layer holds at most its window)" if m.sliding_window else "")),
    ]


def _flop_rows(m: ModelConfig, ctx: int) -> list[Row]:
    d, L = m.hidden_size, m.num_layers
    proj = 2 * L * m.attention_params_per_layer
    mlp = 2 * (m.linear_params_per_token - L * m.attention_params_per_layer)
    head = 2 * m.vocab_size * d
    pair = 2 * m.num_heads * (m.qk_head_dim + m.attn_v_head_dim)
    keys = {w: float(causal_pairs(1, ctx, w)) for w in m.layer_windows}
    scores = sum(layers * pair * keys[w] for w, layers in m.layer_windows.items())
    keys_text = " + ".join(f"{_n(layers)} × {_n(keys[w])}" for w, layers in m.layer_windows.items())
    return [
        Row("flops_attention_projections", "FLOPs per token: attention projections", proj, "FLOPs",
            f"2 × {_n(L)} layers × {_n(m.attention_params_per_layer)} weights"),
        Row("flops_mlp", "FLOPs per token: MLP" + (" (active experts and router)" if m.is_moe else ""), mlp, "FLOPs",
            f"2 × {_n(mlp // 2)} weights a token multiplies by"),
        Row("flops_lm_head", "FLOPs per token: LM head", head, "FLOPs", f"2 × {_n(m.vocab_size)} × {_n(d)}"),
        Row("flops_attention_scores", f"FLOPs per token: attention over {ctx:,} cached tokens", scores, "FLOPs",
            f"2 × {_n(m.num_heads)} heads × ({_n(m.qk_head_dim)} + {_n(m.attn_v_head_dim)}) per key × "
            f"(layers × keys: {keys_text})"),
        Row("flops_per_token", "FLOPs per token, total", proj + mlp + head + scores, "FLOPs",
            "projections + MLP + LM head + attention"),
    ]


def breakdown_notes(model: ModelConfig) -> list[str]:
    """Caveats a reader of the breakdown needs (what is counted how)."""
    notes = ["bf16: 2 bytes per weight and per cached K or V element. FLOPs are for one decode token."]
    if model.is_mla:
        absorbed = 2 * model.num_heads * (2 * model.kv_lora_rank + model.qk_rope_head_dim)
        plain = 2 * model.num_heads * (model.qk_head_dim + model.attn_v_head_dim)
        notes.append(
            f"Attention FLOPs are counted on the up-projected K and V, {plain:,} per key, as the labs' cost model "
            f"does; decode kernels that absorb the up-projections into q and o (DeepSeek-V2, arXiv 2405.04434, "
            f"section 2.1.2) work on the latent instead: 2 × heads × (2 × kv_lora_rank + qk_rope_head_dim) = "
            f"{absorbed:,} per key, while reading only the latent."
        )
    if model.num_kv_heads < model.num_heads and not model.is_mla:
        wrong = model.num_layers * 2 * model.num_heads * model.head_dim * 2
        notes.append(
            f"Sizing the KV cache with the {model.num_heads} query heads instead of the {model.num_kv_heads} KV "
            f"heads would give {wrong:,} bytes per token, {model.num_heads // model.num_kv_heads}x too much (GQA)."
        )
    return notes


def breakdown_json(model: ModelConfig, context_tokens: int, batch: int = 1) -> dict:
    """The breakdown as JSON-ready data: the model's config fields, the inputs, the rows and notes.

    Raises:
        ValueError: see :func:`model_breakdown`.
    """
    return {
        "model": {**model.model_dump(mode="json"), "is_moe": model.is_moe, "is_mla": model.is_mla},
        "context_tokens": context_tokens,
        "batch": batch,
        "bytes_per_param": 2,
        "rows": [asdict(r) for r in model_breakdown(model, context_tokens, batch)],
        "notes": breakdown_notes(model),
    }
