"""Model catalog: decoder architectures from their config.json, and derived sizes.

Every architecture figure is a field of the model's Hugging Face
``config.json``; nothing is inferred from the hidden size when the config
states it (``head_dim`` in particular: Qwen3-4B has hidden 2560 and 32 heads,
but head_dim 128, not 80).

Derived quantities follow the standard counting (JAX scaling book,
transformers.md and inference.md):

* parameters: embeddings, per layer q/k/v/o projections (+ biases), a gated
  MLP of three matrices (or routed and shared experts plus a router), RMSNorm
  weights, and an LM head unless tied to the embeddings;
* KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x bytes per
  element; with multi-head latent attention (MLA, DeepSeek-V2/V3) the cache
  holds one latent of kv_lora_rank + qk_rope_head_dim elements per layer;
* a sliding-window layer caches at most ``sliding_window`` tokens.
"""

from __future__ import annotations

from collections import Counter
from functools import cached_property

import numpy as np

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ModelConfig(BaseModel):
    """A decoder-only transformer's architecture, as its config.json gives it.

    Sizes are counts (layers, heads, elements); every derived size in bytes
    takes ``bytes_per_element`` (2 for bf16).

    Raises:
        pydantic.ValidationError: on non-positive sizes, kv heads that do not
            divide the query heads, or inconsistent MoE / MLA fields.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    name: str
    source: str
    published_params: float | None = Field(default=None, description="total parameters as published")
    published_active_params: float | None = None

    num_layers: int = Field(ge=1, le=1024)
    hidden_size: int = Field(ge=1, le=1 << 17)
    num_heads: int = Field(ge=1, le=4096)
    num_kv_heads: int = Field(ge=1, le=4096)
    head_dim: int = Field(ge=1, le=4096)
    intermediate_size: int = Field(ge=1, le=1 << 20)
    vocab_size: int = Field(ge=1, le=1 << 22)
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    qk_norm: bool = False

    sliding_window: int | None = Field(default=None, ge=1)
    sliding_layers: tuple[bool, ...] | None = None

    num_experts: int = Field(default=0, ge=0, le=4096)
    experts_per_token: int = Field(default=0, ge=0, le=4096)
    num_shared_experts: int = Field(default=0, ge=0, le=64)
    moe_intermediate_size: int | None = Field(default=None, ge=1)
    first_dense_layers: int = Field(default=0, ge=0)

    kv_lora_rank: int | None = Field(default=None, ge=1)
    q_lora_rank: int | None = Field(default=None, ge=1)
    qk_rope_head_dim: int = Field(default=0, ge=0)
    qk_nope_head_dim: int = Field(default=0, ge=0)
    v_head_dim: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if not self.is_mla and self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_kv_heads ({self.num_kv_heads}) must divide num_heads ({self.num_heads})"
            )
        if self.num_experts and not 1 <= self.experts_per_token <= self.num_experts:
            raise ValueError(
                f"experts_per_token must be between 1 and num_experts ({self.num_experts})"
            )
        if self.first_dense_layers > self.num_layers:
            raise ValueError("first_dense_layers cannot exceed num_layers")
        if self.sliding_layers is not None and len(self.sliding_layers) != self.num_layers:
            raise ValueError("sliding_layers needs one entry per layer")
        if self.is_mla and not (self.qk_nope_head_dim and self.v_head_dim):
            raise ValueError("MLA needs qk_nope_head_dim and v_head_dim")
        return self

    # ---- structure -------------------------------------------------------

    @property
    def is_moe(self) -> bool:
        """True for mixture-of-experts models (routed experts in some layers)."""
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank is not None

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is routed experts (the rest are dense)."""
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def qk_head_dim(self) -> int:
        """Per-head width of the query-key dot product."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def attn_v_head_dim(self) -> int:
        """Per-head width of the values (and of the attention output)."""
        return self.v_head_dim if self.is_mla else self.head_dim

    @cached_property
    def layer_windows(self) -> dict[int | None, int]:
        """Layer count per attention window: {window tokens or None (full): layers}."""
        if self.sliding_window is None:
            return {None: self.num_layers}
        pattern = self.sliding_layers or (True,) * self.num_layers
        return dict(Counter(self.sliding_window if s else None for s in pattern))

    # ---- parameters ------------------------------------------------------

    @cached_property
    def attention_params_per_layer(self) -> int:
        """q, k, v, o projection weights (+ biases, q/k norms) of one layer."""
        d, H = self.hidden_size, self.num_heads
        if self.is_mla:
            q_out = H * self.qk_head_dim
            q = d * q_out if self.q_lora_rank is None else d * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * q_out
            kv_a = d * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv_b = self.kv_lora_rank * H * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv_a + kv_b + H * self.v_head_dim * d
        q_dim, kv_dim = H * self.head_dim, self.num_kv_heads * self.head_dim
        params = d * q_dim + 2 * d * kv_dim + q_dim * d
        if self.attention_bias:
            params += q_dim + 2 * kv_dim
        if self.qk_norm:
            params += 2 * self.head_dim
        return params

    @property
    def dense_mlp_params(self) -> int:
        """A gated MLP (gate, up, down) of intermediate_size."""
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def expert_params(self) -> int:
        """One routed or shared expert: a gated MLP of moe_intermediate_size."""
        return 3 * self.hidden_size * (self.moe_intermediate_size or self.intermediate_size)

    @cached_property
    def param_count(self) -> int:
        """All parameters: what must be resident in memory (every expert counted)."""
        return self._params(experts=self.num_experts)

    @cached_property
    def active_param_count(self) -> int:
        """Parameters one token touches: experts_per_token routed experts per MoE layer."""
        return self._params(experts=self.experts_per_token)

    def _params(self, experts: int) -> int:
        d, L = self.hidden_size, self.num_layers
        embed = self.vocab_size * d
        head = 0 if self.tie_word_embeddings else self.vocab_size * d
        per_layer = self.attention_params_per_layer + 2 * d
        dense_layers = L - self.num_moe_layers
        mlp = dense_layers * self.dense_mlp_params
        if self.is_moe:
            router = d * self.num_experts
            mlp += self.num_moe_layers * (router + (experts + self.num_shared_experts) * self.expert_params)
        return embed + head + L * per_layer + mlp + d

    @cached_property
    def linear_params_per_token(self) -> int:
        """Matmul weights one token multiplies by, LM head and embedding excluded.

        Twice this is the linear-layer FLOPs per token (the "2N" rule).
        """
        moe = self.num_moe_layers * (
            self.hidden_size * self.num_experts
            + (self.experts_per_token + self.num_shared_experts) * self.expert_params
        )
        dense = (self.num_layers - self.num_moe_layers) * self.dense_mlp_params
        return self.num_layers * self.attention_params_per_layer + dense + moe

    # ---- sizes in bytes -------------------------------------------------

    def weight_bytes(self, bytes_per_param: float = 2.0) -> float:
        """Resident weight bytes: every parameter, every expert."""
        return self.param_count * bytes_per_param

    @property
    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements per token per layer: 2 x kv_heads x head_dim, or the MLA latent."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    def kv_bytes_per_token(self, bytes_per_element: float = 2.0) -> float:
        """KV cache bytes one token adds across all layers (before any window cap)."""
        return self.num_layers * self.kv_elements_per_token_per_layer * bytes_per_element

    def kv_cache_bytes(self, context_tokens, bytes_per_element: float = 2.0):
        """KV cache bytes one sequence of ``context_tokens`` holds (numpy-broadcastable).

        Sliding-window layers hold at most ``sliding_window`` tokens.
        """
        ctx = np.asarray(context_tokens, dtype=float)
        per_layer = self.kv_elements_per_token_per_layer * bytes_per_element
        total = 0.0
        for window, layers in self.layer_windows.items():
            held = ctx if window is None else np.minimum(ctx, window)
            total = total + layers * per_layer * held
        return total


_CATALOG = [
    ModelConfig(
        id="llama-2-7b", name="Llama-2-7B",
        source="meta-llama/Llama-2-7b-hf config.json (copies in forks with that _name_or_path)",
        published_params=6.74e9,
        num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=32, head_dim=128,
        intermediate_size=11008, vocab_size=32000,
    ),
    ModelConfig(
        id="llama-3.1-8b", name="Llama-3.1-8B",
        source="meta-llama/Llama-3.1-8B config.json (copy: mlx-community/Meta-Llama-3.1-8B-bf16)",
        published_params=8.03e9,
        num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8, head_dim=128,
        intermediate_size=14336, vocab_size=128256,
    ),
    ModelConfig(
        id="llama-3.1-70b", name="Llama-3.1-70B",
        source="meta-llama/Llama-3.1-70B config.json (copy: oumi configs/recipes/llama3_1)",
        published_params=70.6e9,
        num_layers=80, hidden_size=8192, num_heads=64, num_kv_heads=8, head_dim=128,
        intermediate_size=28672, vocab_size=128256,
    ),
    ModelConfig(
        id="llama-3.2-1b", name="Llama-3.2-1B",
        source="meta-llama/Llama-3.2-1B config.json (copy: unsloth/Llama-3.2-1B)",
        published_params=1.24e9,
        num_layers=16, hidden_size=2048, num_heads=32, num_kv_heads=8, head_dim=64,
        intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True,
    ),
    ModelConfig(
        id="llama-3.2-3b", name="Llama-3.2-3B",
        source="meta-llama/Llama-3.2-3B config.json (copy: mlx-community/Llama-3.2-3B-bf16)",
        published_params=3.21e9,
        num_layers=28, hidden_size=3072, num_heads=24, num_kv_heads=8, head_dim=128,
        intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True,
    ),
    ModelConfig(
        id="qwen2.5-7b", name="Qwen2.5-7B",
        source="Qwen/Qwen2.5-7B-Instruct config.json (q/k/v projections carry biases)",
        published_params=7.62e9,
        num_layers=28, hidden_size=3584, num_heads=28, num_kv_heads=4, head_dim=128,
        intermediate_size=18944, vocab_size=152064, attention_bias=True,
    ),
    ModelConfig(
        id="qwen3-4b", name="Qwen3-4B",
        source="Qwen/Qwen3-4B config.json (head_dim 128 although hidden/heads is 80; q/k RMSNorm)",
        published_params=4.02e9,
        num_layers=36, hidden_size=2560, num_heads=32, num_kv_heads=8, head_dim=128,
        intermediate_size=9728, vocab_size=151936, tie_word_embeddings=True, qk_norm=True,
    ),
    ModelConfig(
        id="mistral-7b-v0.1", name="Mistral-7B-v0.1",
        source="mistralai/Mistral-7B-v0.1 config.json (sliding_window 4096 on every layer)",
        published_params=7.24e9,
        num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8, head_dim=128,
        intermediate_size=14336, vocab_size=32000, sliding_window=4096,
    ),
    ModelConfig(
        id="mixtral-8x7b", name="Mixtral-8x7B",
        source="mistralai/Mixtral-8x7B-Instruct-v0.1 config.json (num_local_experts 8, "
        "num_experts_per_tok 2)",
        published_params=46.7e9, published_active_params=12.9e9,
        num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8, head_dim=128,
        intermediate_size=14336, vocab_size=32000, num_experts=8, experts_per_token=2,
    ),
]

MODELS: dict[str, ModelConfig] = {m.id: m for m in _CATALOG}


def get_model(model_id: str) -> ModelConfig:
    """Look up a catalog model.

    Raises:
        KeyError: the id is not in the catalog; the message lists the valid ids.
    """
    try:
        return MODELS[model_id]
    except KeyError:
        raise KeyError(f"unknown model {model_id!r}; valid: {', '.join(MODELS)}") from None
