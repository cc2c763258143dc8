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

The catalog's DeepSeek-V3 and Gemma-2 entries are built from their
config.json through :mod:`engine.hf_config`, the same path a user's pasted
config takes.
"""

from __future__ import annotations

from collections import Counter
from functools import cached_property

import numpy as np

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.hf_config import model_fields_from_hf_config


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
    norms_per_layer: int = Field(
        default=2, ge=0, le=8,
        description="RMSNorm weight vectors of width hidden_size per layer (2; Gemma-2/3 have 4)",
    )

    sliding_window: int | None = Field(default=None, ge=1, le=1 << 24)
    sliding_layers: tuple[bool, ...] | None = None

    num_experts: int = Field(default=0, ge=0, le=4096)
    experts_per_token: int = Field(default=0, ge=0, le=4096)
    num_shared_experts: int = Field(default=0, ge=0, le=64)
    moe_intermediate_size: int | None = Field(default=None, ge=1, le=1 << 20)
    first_dense_layers: int = Field(default=0, ge=0, le=1024)

    kv_lora_rank: int | None = Field(default=None, ge=1, le=1 << 16)
    q_lora_rank: int | None = Field(default=None, ge=1, le=1 << 17)
    qk_rope_head_dim: int = Field(default=0, ge=0, le=4096)
    qk_nope_head_dim: int = Field(default=0, ge=0, le=4096)
    v_head_dim: int = Field(default=0, ge=0, le=4096)

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
        per_layer = self.attention_params_per_layer + self.norms_per_layer * d
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

    def expected_distinct_experts(self, tokens):
        """Expected distinct routed experts one MoE layer reads for ``tokens`` tokens (numpy-broadcastable).

        With each token routed to k of E experts uniformly and independently,
        one expert is missed by a token with probability 1 - k/E, so
        E x (1 - (1 - k/E)^T) experts are touched [derived; the uniform routing
        an auxiliary load-balancing loss aims at]. 0 for a dense model.
        At T = 1 this is k; it tends to E as T grows: a large decode batch
        reads nearly every expert's weights, which is why MoE decode bytes
        approach the resident total (science.md, section B).
        """
        t = np.asarray(tokens, dtype=float)
        if not self.is_moe:
            return np.zeros_like(t)
        E, k = self.num_experts, self.experts_per_token
        return E * (1 - (1 - k / E) ** t)

    def weights_read_per_step(self, tokens, bytes_per_param: float = 2.0):
        """Weight bytes one step of ``tokens`` tokens reads: every non-expert weight, the experts routed to.

        LM head and embedding included (a decode step samples every sequence).
        Numpy-broadcastable in ``tokens``; for a dense model it is ``weight_bytes``.
        """
        routed_resident = self.num_moe_layers * self.num_experts * self.expert_params
        routed_read = self.num_moe_layers * self.expected_distinct_experts(tokens) * self.expert_params
        return (self.param_count - routed_resident + routed_read) * bytes_per_param

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

# Architecture fields copied from the models' config.json files; read by the same parser as a user's.
DEEPSEEK_V3_CONFIG = {
    "_name_or_path": "deepseek-ai/DeepSeek-V3", "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "intermediate_size": 18432,
    "num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": 129280, "tie_word_embeddings": False,
    "attention_bias": False, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 256, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "first_k_dense_replace": 3, "moe_layer_freq": 1,
    "num_nextn_predict_layers": 1,
}
GEMMA_2_9B_CONFIG = {
    "_name_or_path": "google/gemma-2-9b", "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
    "num_hidden_layers": 42, "hidden_size": 3584, "intermediate_size": 14336, "num_attention_heads": 16,
    "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 256000, "attention_bias": False,
    "sliding_window": 4096, "query_pre_attn_scalar": 256,
}

_CATALOG += [
    ModelConfig(
        id="deepseek-v3", name="DeepSeek-V3",
        source="deepseek-ai/DeepSeek-V3 config.json (MLA: the cache holds a 512 + 64 latent per layer; "
        "256 routed + 1 shared experts, top-8, first 3 layers dense). 671 B parameters counted: the main "
        "model; Hugging Face's 685 B adds the 14 B multi-token-prediction module (DeepSeek-V3 README). "
        "Weights ship in FP8 (1 byte each); the labs count bf16 unless told otherwise",
        published_params=671e9, published_active_params=37e9,
        **model_fields_from_hf_config(DEEPSEEK_V3_CONFIG),
    ),
    ModelConfig(
        id="gemma-2-9b", name="Gemma-2-9B",
        source="google/gemma-2-9b config.json (head_dim 256 although 3584 / 16 = 224; sliding window of "
        "4,096 tokens on every other layer, starting with layer 0, as transformers' Gemma2Config lays "
        "them out; 4 RMSNorms per layer; tied embeddings by the config class's default)",
        published_params=9.24e9,
        **model_fields_from_hf_config(GEMMA_2_9B_CONFIG),
    ),
]

MODELS: dict[str, ModelConfig] = {m.id: m for m in _CATALOG}


def register_model(model: ModelConfig) -> None:
    """Add a model to the catalog, selectable by its id in every lab (``serve --model-config``).

    Raises:
        ValueError: the id is already taken (a catalog entry is never replaced).
    """
    if model.id in MODELS or model.id == "custom":
        raise ValueError(f"model id {model.id!r} is taken; valid new ids are anything but: custom, {', '.join(MODELS)}")
    MODELS[model.id] = model


def get_model(model_id: str) -> ModelConfig:
    """Look up a catalog model.

    Raises:
        KeyError: the id is not in the catalog; the message lists the valid ids.
    """
    try:
        return MODELS[model_id]
    except KeyError:
        raise KeyError(f"unknown model {model_id!r}; valid: {', '.join(MODELS)}") from None
