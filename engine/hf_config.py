"""Read a Hugging Face ``config.json`` into the fields of :class:`engine.models.ModelConfig`.

The families understood, and where each rule comes from (the transformers
configuration and modeling code of that ``model_type``):

* ``llama``, ``mistral``, ``mixtral``, ``qwen2``: ``head_dim`` when given,
  else hidden_size / num_attention_heads (what their modeling code does);
* ``qwen3``, ``qwen3_moe``, ``gemma``, ``gemma2``, ``gemma3_text`` (and the
  multimodal ``gemma3`` wrapper's ``text_config``): ``head_dim`` must be
  given (Qwen3-4B: 128, although 2560 / 32 = 80; Gemma: 256);
* sliding windows: Mistral/Mixtral slide every layer; Qwen2/Qwen3 slide the
  layers from ``max_window_layers`` on when ``use_sliding_window``; Gemma-2
  alternates sliding and full layers starting with a sliding one; Gemma-3
  makes every ``sliding_window_pattern``-th layer full (5 sliding : 1 full);
  an explicit ``layer_types`` list (newer transformers) wins over all of these;
* MoE: Mixtral's ``num_local_experts`` (experts of ``intermediate_size``),
  Qwen3-MoE's ``num_experts`` and ``moe_intermediate_size``, DeepSeek's
  ``n_routed_experts``, ``n_shared_experts``, ``first_k_dense_replace``;
* MLA (``deepseek_v2``, ``deepseek_v3``): ``kv_lora_rank``, ``q_lora_rank``,
  ``qk_rope_head_dim``, ``qk_nope_head_dim``, ``v_head_dim``; the KV cache
  holds the latent (kv_lora_rank + qk_rope_head_dim per layer), not per-head
  K and V.

Core sizes (layers, hidden size, heads, KV heads, intermediate size) are never
defaulted: a config without them is refused with a message naming every
missing field. A field that only the family's transformers config class
fills in (Gemma's tied embeddings, Gemma-3's vocabulary of 262,208, Mistral's
4,096-token window) takes that class's default, and the default is reported
back in ``notes`` so that the user sees it. An unknown ``model_type`` is
refused: its MLP, norms and attention cannot be known from sizes alone.

Limits against hostile input: at most ``MAX_CONFIG_BYTES`` of JSON, every size
bounded (the bounds are in the messages), at most ``MAX_TOTAL_PARAMS``
parameters.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

if TYPE_CHECKING:  # engine.models imports this module to build its catalog
    from engine.models import ModelConfig

MAX_CONFIG_BYTES = 32 * 1024
MAX_ENCODED_CHARS = 4 * math.ceil(MAX_CONFIG_BYTES / 3)  # base64url of MAX_CONFIG_BYTES
MAX_TOTAL_PARAMS = 1e14  # 100 T parameters; the largest published models are ~2 T
CUSTOM_MODEL_ID = "custom"

# Bounds of every size read, inclusive (they mirror ModelConfig's).
BOUNDS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, 1024),
    "hidden_size": (1, 1 << 17),
    "num_attention_heads": (1, 4096),
    "num_key_value_heads": (1, 4096),
    "head_dim": (1, 4096),
    "intermediate_size": (1, 1 << 20),
    "vocab_size": (1, 1 << 22),
    "sliding_window": (1, 1 << 24),
    "max_window_layers": (0, 1024),
    "sliding_window_pattern": (1, 1024),
    "num_local_experts": (1, 4096),
    "num_experts": (1, 4096),
    "n_routed_experts": (1, 4096),
    "num_experts_per_tok": (1, 4096),
    "n_shared_experts": (0, 64),
    "moe_intermediate_size": (1, 1 << 20),
    "first_k_dense_replace": (0, 1024),
    "moe_layer_freq": (1, 1024),
    "decoder_sparse_step": (1, 1024),
    "kv_lora_rank": (1, 1 << 16),
    "q_lora_rank": (1, 1 << 17),
    "qk_rope_head_dim": (0, 4096),
    "qk_nope_head_dim": (1, 4096),
    "v_head_dim": (1, 4096),
    "num_nextn_predict_layers": (0, 64),
}

# ModelConfig field -> the config.json key a user wrote (for messages).
_HF_NAME = {
    "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads", "num_kv_heads": "num_key_value_heads",
    "experts_per_token": "num_experts_per_tok", "num_shared_experts": "n_shared_experts",
    "first_dense_layers": "first_k_dense_replace", "sliding_layers": "layer_types",
}


class ConfigError(ValueError):
    """A config.json that cannot be read as a decoder model; the message says what to fix."""


@dataclass(frozen=True)
class _Family:
    """How one ``model_type`` lays its fields out (see the module docstring)."""

    head_dim: Literal["optional", "required"]
    qkv_bias: Literal["none", "field", "always"]  # no biases / attention_bias key / always (Qwen2)
    sliding: Literal["none", "all", "qwen", "alternate", "pattern"]
    moe: Literal["none", "mixtral", "qwen_moe", "deepseek"] = "none"
    mla: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    tie_default: bool = False
    window_default: int | None = None  # the config class's sliding_window when the key is absent
    vocab_default: int | None = None


FAMILIES: dict[str, _Family] = {
    "llama": _Family(head_dim="optional", qkv_bias="field", sliding="none"),
    "mistral": _Family(head_dim="optional", qkv_bias="none", sliding="all", window_default=4096),
    "mixtral": _Family(head_dim="optional", qkv_bias="none", sliding="all", moe="mixtral"),
    "qwen2": _Family(head_dim="optional", qkv_bias="always", sliding="qwen"),
    "qwen3": _Family(head_dim="required", qkv_bias="field", sliding="qwen", qk_norm=True),
    "qwen3_moe": _Family(head_dim="required", qkv_bias="field", sliding="qwen", qk_norm=True, moe="qwen_moe"),
    "gemma": _Family(head_dim="required", qkv_bias="field", sliding="none", tie_default=True),
    "gemma2": _Family(head_dim="required", qkv_bias="field", sliding="alternate", norms_per_layer=4,
                      tie_default=True, window_default=4096),
    "gemma3_text": _Family(head_dim="required", qkv_bias="field", sliding="pattern", norms_per_layer=4,
                           qk_norm=True, tie_default=True, window_default=4096, vocab_default=262_208),
    "deepseek_v2": _Family(head_dim="optional", qkv_bias="none", sliding="none", moe="deepseek", mla=True),
    "deepseek_v3": _Family(head_dim="optional", qkv_bias="none", sliding="none", moe="deepseek", mla=True),
}
# Multimodal wrappers whose text decoder sits in ``text_config`` (the vision tower is not counted).
WRAPPERS = {"gemma3": "gemma3_text"}
SUPPORTED = sorted([*FAMILIES, *WRAPPERS])


@dataclass
class _Reader:
    """Reads typed fields of one config object, collecting every problem and every key read."""

    data: Mapping[str, Any]
    where: str = ""
    problems: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    read: dict[str, Any] = field(default_factory=dict)

    def raw(self, key: str) -> Any:
        if key in self.data:
            self.read[key] = self.data[key]
        return self.data.get(key)

    def has(self, key: str) -> bool:
        return self.raw(key) is not None

    def integer(self, key: str, *, required: bool = False, default: int | None = None) -> int | None:
        value = self.raw(key)
        if value is None:
            if required:
                self.missing.append(self.where + key)
            return default
        lo, hi = BOUNDS[key]
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            self.problems.append(f"{self.where}{key} must be an integer from {lo:,} to {hi:,}, got {_show(value)}")
            return default
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.problems.append(f"{self.where}{key} must be true or false, got {_show(value)}")
            return default
        return value


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class HfModel:
    """What :func:`read_hf_config` found.

    Attributes:
        fields: keyword arguments for ModelConfig (without id, name, source).
        model_type: the family that was read.
        name: a display name (``_name_or_path``'s last part, or the model_type).
        notes: sentences for the user to check: values the config does not
            state (a family default, head_dim = hidden_size / heads) and parts
            not counted (a vision encoder, a multi-token-prediction module).
        normalized: the config reduced to the keys that were read: a valid
            config.json that reads back to the same fields (what links carry).
    """

    fields: dict[str, Any]
    model_type: str
    name: str
    notes: tuple[str, ...]
    normalized: dict[str, Any]


def read_hf_config(data: Any) -> HfModel:
    """Read a parsed config.json object.

    Args:
        data: the JSON object (a dict).

    Returns:
        HfModel.

    Raises:
        ConfigError: not an object, unknown model_type, missing fields (all
            named in one message), wrong types, sizes out of bounds, or
            inconsistent fields (e.g. layer_types of the wrong length).
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"config.json must be a JSON object, got {type(data).__name__}")
    model_type = data.get("model_type")
    if model_type is None:
        raise ConfigError(f"config.json has no model_type; supported: {', '.join(SUPPORTED)}")
    if not isinstance(model_type, str) or model_type not in FAMILIES and model_type not in WRAPPERS:
        raise ConfigError(
            f"model_type {_show(model_type)} is not an architecture this lab can count; "
            f"supported: {', '.join(SUPPORTED)}. Its MLP, norms and attention layout would have to be guessed."
        )
    normalized: dict[str, Any] = {"model_type": model_type}
    if isinstance(data.get("_name_or_path"), str) and data["_name_or_path"]:
        normalized["_name_or_path"] = data["_name_or_path"][:200]
    notes: list[str] = []
    text = data
    where = ""
    if model_type in WRAPPERS:
        text = data.get("text_config")
        if not isinstance(text, Mapping):
            raise ConfigError(f"a {model_type} config needs a text_config object (the text decoder's sizes)")
        inner_type = text.get("model_type", WRAPPERS[model_type])
        if inner_type != WRAPPERS[model_type]:
            raise ConfigError(f"text_config.model_type must be {WRAPPERS[model_type]}, got {_show(inner_type)}")
        notes.append(f"{model_type}: only the text decoder (text_config) is counted, not the vision encoder")
        where = "text_config."
    family_name = WRAPPERS.get(model_type, model_type)
    reader = _Reader(text, where=where)
    fields = _read_family(reader, FAMILIES[family_name], family_name, notes)
    if reader.missing:
        reader.problems.insert(0, f"missing {', '.join(reader.missing)} (needed for a {family_name} model)")
    if reader.problems:
        raise ConfigError("config.json: " + "; ".join(reader.problems))
    if where:
        normalized["text_config"] = {"model_type": family_name, **reader.read}
    else:
        normalized.update(reader.read)
    return HfModel(fields=fields, model_type=model_type, name=_display_name(data, model_type),
                   notes=tuple(notes), normalized=normalized)


def _read_family(r: _Reader, fam: _Family, family: str, notes: list[str]) -> dict[str, Any]:
    """Every ModelConfig field of one family; problems and missing keys are collected in ``r``."""
    L = r.integer("num_hidden_layers", required=True)
    d = r.integer("hidden_size", required=True)
    H = r.integer("num_attention_heads", required=True)
    inter = r.integer("intermediate_size", required=True)
    vocab = r.integer("vocab_size", required=fam.vocab_default is None, default=fam.vocab_default)
    if not r.has("vocab_size") and fam.vocab_default is not None:
        notes.append(f"vocab_size absent: {fam.vocab_default:,}, the {family} config class's default")
    tie = r.flag("tie_word_embeddings", fam.tie_default)
    if not r.has("tie_word_embeddings"):
        notes.append(f"tie_word_embeddings absent: {str(fam.tie_default).lower()}, the {family} default")
    fields: dict[str, Any] = dict(
        num_layers=L, hidden_size=d, num_heads=H, intermediate_size=inter, vocab_size=vocab,
        tie_word_embeddings=tie, qk_norm=fam.qk_norm, norms_per_layer=fam.norms_per_layer,
    )
    if fam.mla:
        fields.update(_read_mla(r, H))
    else:
        fields.update(_read_attention(r, fam, d, H, notes))
    fields.update(_read_windows(r, fam, family, L, notes))
    fields.update(_read_moe(r, fam, L, inter, notes))
    return fields


def _read_attention(r: _Reader, fam: _Family, d: int | None, H: int | None, notes: list[str]) -> dict[str, Any]:
    K = r.integer("num_key_value_heads", required=True)
    head_dim = r.integer("head_dim", required=fam.head_dim == "required")
    if head_dim is None and fam.head_dim == "optional" and d is not None and H is not None:
        if d % H:
            r.problems.append(f"head_dim is absent and hidden_size ({d}) is not a multiple of "
                              f"num_attention_heads ({H}); add head_dim")
        else:
            head_dim = d // H
            notes.append(f"head_dim absent: hidden_size / num_attention_heads = {d} / {H} = {head_dim}, "
                           "as the modeling code computes it")
    if fam.qkv_bias == "always":
        bias = True
    elif fam.qkv_bias == "field":
        bias = r.flag("attention_bias", False)
    else:
        bias = False
    if r.flag("mlp_bias", False):
        r.problems.append("mlp_bias true is not modelled (only bias-free gated MLPs are counted)")
    return dict(num_kv_heads=K, head_dim=head_dim, attention_bias=bias)


def _read_mla(r: _Reader, H: int | None) -> dict[str, Any]:
    kv_rank = r.integer("kv_lora_rank", required=True)
    rope = r.integer("qk_rope_head_dim", required=True)
    nope = r.integer("qk_nope_head_dim", required=True)
    v = r.integer("v_head_dim", required=True)
    q_rank = r.integer("q_lora_rank")  # null: queries are projected directly (DeepSeek-V2-Lite)
    if r.flag("attention_bias", False):
        r.problems.append("attention_bias true with latent attention is not modelled")
    # One latent serves every head: num_key_value_heads plays no part in MLA's cache.
    return dict(
        num_kv_heads=1, head_dim=(nope or 0) + (rope or 0) or 1, kv_lora_rank=kv_rank, q_lora_rank=q_rank,
        qk_rope_head_dim=rope, qk_nope_head_dim=nope, v_head_dim=v,
    )


def _read_windows(r: _Reader, fam: _Family, family: str, L: int | None, notes: list[str]) -> dict[str, Any]:
    if fam.sliding == "none":
        return {}
    if fam.sliding == "qwen" and not r.flag("use_sliding_window", False):
        return {"sliding_window": None}  # Qwen2/3 ignore sliding_window unless use_sliding_window
    pattern = _layer_types(r, L)
    if pattern is None and L is not None:
        if fam.sliding == "qwen":
            start = r.integer("max_window_layers", required=True)
            pattern = None if start is None else tuple(i >= start for i in range(L))
        elif fam.sliding == "alternate":
            pattern = tuple(i % 2 == 0 for i in range(L))  # (i + 1) % 2 != 0: layer 0 slides, layer 1 is full
        elif fam.sliding == "pattern":
            every = r.integer("sliding_window_pattern", default=6)
            if not r.has("sliding_window_pattern"):
                notes.append(f"sliding_window_pattern absent: 6 (5 sliding layers, then 1 full), "
                               f"the {family} default")
            pattern = tuple((i + 1) % every != 0 for i in range(L))
        else:
            pattern = (True,) * L
    if pattern is None or not any(pattern):
        return {"sliding_window": None}
    if "sliding_window" in r.data:
        window = r.integer("sliding_window")  # null: no window, every layer attends to the whole context
    elif fam.window_default is not None:
        window = fam.window_default
        notes.append(f"sliding_window absent: {window:,} tokens, the {family} default")
    else:  # Mixtral's class default is no window; Qwen with use_sliding_window must say which
        window = r.integer("sliding_window", required=fam.sliding == "qwen")
    if window is None:
        return {"sliding_window": None}
    return {"sliding_window": window, "sliding_layers": None if all(pattern) else pattern}


def _layer_types(r: _Reader, L: int | None) -> tuple[bool, ...] | None:
    value = r.raw("layer_types")
    if value is None:
        return None
    kinds = {"sliding_attention": True, "full_attention": False}
    if not isinstance(value, list) or not all(isinstance(v, str) and v in kinds for v in value):
        r.problems.append(f"{r.where}layer_types must be a list of \"sliding_attention\" / \"full_attention\" "
                          "(other attention kinds are not modelled)")
        return None
    if L is not None and len(value) != L:
        r.problems.append(f"{r.where}layer_types has {len(value)} entries; num_hidden_layers is {L}")
        return None
    return tuple(kinds[v] for v in value)


def _read_moe(r: _Reader, fam: _Family, L: int | None, inter: int | None, notes: list[str]) -> dict[str, Any]:
    if fam.moe == "none":
        return {}
    if fam.moe == "mixtral":
        E = r.integer("num_local_experts", required=True)
        k = r.integer("num_experts_per_tok", required=True)
        return dict(num_experts=E, experts_per_token=k)  # each expert is a gated MLP of intermediate_size
    if fam.moe == "qwen_moe":
        E = r.integer("num_experts", required=True)
        k = r.integer("num_experts_per_tok", required=True)
        size = r.integer("moe_intermediate_size", required=True)
        if r.integer("decoder_sparse_step", default=1) != 1:
            r.problems.append("decoder_sparse_step other than 1 (MoE only every n-th layer) is not modelled")
        only = r.raw("mlp_only_layers")
        if only not in (None, []):
            r.problems.append("mlp_only_layers (dense layers between MoE ones) is not modelled; it must be []")
        return dict(num_experts=E, experts_per_token=k, moe_intermediate_size=size)
    E = r.integer("n_routed_experts", required=True)
    k = r.integer("num_experts_per_tok", required=True)
    shared = r.integer("n_shared_experts", required=True)
    size = r.integer("moe_intermediate_size", required=True)
    dense = r.integer("first_k_dense_replace", required=True)
    if r.integer("moe_layer_freq", default=1) != 1:
        r.problems.append("moe_layer_freq other than 1 is not modelled")
    mtp = r.integer("num_nextn_predict_layers", default=0)
    if mtp:
        notes.append(f"num_nextn_predict_layers = {mtp}: the multi-token-prediction module is not counted "
                       "(it serves speculative decoding; DeepSeek-V3's 671 B excludes its 14 B)")
    return dict(num_experts=E, experts_per_token=k, num_shared_experts=shared, moe_intermediate_size=size,
                first_dense_layers=dense)


_NAME_OK = re.compile(r"[^A-Za-z0-9 ._+()-]+")


def _display_name(data: Mapping[str, Any], model_type: str) -> str:
    path = data.get("_name_or_path")
    if isinstance(path, str) and path.strip("/ "):
        name = _NAME_OK.sub("", path.rstrip("/").rsplit("/", 1)[-1])[:80]
        if name:
            return name
    return f"custom {model_type} model"


def model_fields_from_hf_config(data: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig keyword arguments of a config.json object (the catalog's path).

    Raises:
        ConfigError: see :func:`read_hf_config`.
    """
    return read_hf_config(data).fields


def build_model(hf: HfModel, *, id: str, name: str, source: str, **extra: Any) -> ModelConfig:
    """A ModelConfig from what :func:`read_hf_config` found.

    Raises:
        ConfigError: the sizes are inconsistent (kv heads not dividing heads,
            experts per token above the expert count, ...) or the model has
            more than MAX_TOTAL_PARAMS parameters.
    """
    from engine.models import ModelConfig  # engine.models imports this module at load time

    try:
        model = ModelConfig(id=id, name=name, source=source, **hf.fields, **extra)
    except ValidationError as exc:
        problems = []
        for e in exc.errors()[:10]:
            loc = ".".join(_HF_NAME.get(str(p), str(p)) for p in e["loc"])
            msg = e["msg"].removeprefix("Value error, ")
            for ours, theirs in _HF_NAME.items():
                msg = msg.replace(ours, theirs)
            problems.append(f"{loc}: {msg}" if loc else msg)
        raise ConfigError("config.json: " + "; ".join(problems)) from None
    if model.param_count > MAX_TOTAL_PARAMS:
        raise ConfigError(
            f"config.json describes {model.param_count:.3g} parameters; the limit is {MAX_TOTAL_PARAMS:.0e}"
        )
    return model


@dataclass(frozen=True)
class ParsedModel:
    """A user's config.json, read and checked.

    Attributes:
        model: the ModelConfig (id ``custom`` unless given).
        notes: values not written in the config (see HfModel).
        encoded: base64url of the normalized config's compact JSON: what a link
            and the ``custom_model`` param carry.
    """

    model: ModelConfig
    notes: tuple[str, ...]
    encoded: str


def decode_json_text(value: str | bytes, *, what: str, limit: int = MAX_CONFIG_BYTES) -> Any:
    """Parse JSON given as text or as base64url-encoded text (the link form).

    Raises:
        ConfigError: too large, not base64url, not UTF-8, or not JSON; the
            message starts with ``what``.
    """
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{what} is not UTF-8 text") from None
    text = value.strip().lstrip("\ufeff")  # a byte-order mark, as some editors save JSON
    if len(text) > 4 * math.ceil(limit / 3):  # longer than base64url of `limit` bytes: too long either way
        raise ConfigError(f"{what} is {len(text):,} characters; the limit is {limit:,} bytes of JSON")
    if not text.startswith("{"):
        if not re.fullmatch(r"[A-Za-z0-9_-]+={0,2}", text):
            raise ConfigError(f"{what} must be a JSON object or its base64url encoding")
        try:
            text = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise ConfigError(f"{what} is not valid base64url-encoded UTF-8 JSON") from None
    if len(text.encode("utf-8")) > limit:
        raise ConfigError(f"{what} is {len(text.encode('utf-8')):,} bytes of JSON; the limit is {limit:,}")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ConfigError(f"{what} is nested too deeply") from None
    except ValueError as exc:
        raise ConfigError(f"{what} is not valid JSON: {exc}") from None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def encode_json(data: Any) -> str:
    """Compact JSON, base64url-encoded without padding (safe in a URL query)."""
    raw = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def parse_hf_config(value: str | bytes, *, id: str = CUSTOM_MODEL_ID, source: str | None = None) -> ParsedModel:
    """Read a user's config.json (JSON text, or base64url of it) into a checked model.

    Raises:
        ConfigError: see :func:`decode_json_text`, :func:`read_hf_config` and
            :func:`build_model`.
    """
    hf = read_hf_config(decode_json_text(value, what="config.json"))
    source = source or f"your config.json (model_type {hf.model_type}); not a catalog entry"
    model = build_model(hf, id=id, name=hf.name, source=source)
    return ParsedModel(model=model, notes=hf.notes, encoded=encode_json(hf.normalized))


@lru_cache(maxsize=256)
def parse_custom_model(value: str) -> ParsedModel:
    """:func:`parse_hf_config` with id ``custom``, cached: every slider move re-sends the same config."""
    return parse_hf_config(value)


def load_model_config(path: str | Path, *, id: str | None = None) -> ModelConfig:
    """Read a config.json file for ``pdlab serve --model-config``.

    The id is ``id``, else the lowercased last part of ``_name_or_path``, else
    the file's name without ``.json`` (its folder's name for ``config.json``).

    Raises:
        ConfigError: unreadable file, or see :func:`parse_hf_config`.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            text = f.read(2 * MAX_CONFIG_BYTES)  # enough to tell "too large" without reading a huge file
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    data = decode_json_text(text, what=str(path))
    hf = read_hf_config(data)
    named = isinstance(data.get("_name_or_path"), str) and bool(data["_name_or_path"].strip("/ "))
    if id is None:
        id = hf.name if named else (path.parent.name if path.stem == "config" else path.stem)
    model_id = re.sub(r"[^a-z0-9.]+", "-", id.lower()).strip("-")[:64] or "model"
    return build_model(hf, id=model_id, name=hf.name if named else model_id,
                       source=f"config.json file {path.name} given to pdlab serve (model_type {hf.model_type})")
