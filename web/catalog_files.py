"""``pdlab serve --model-config FILE --gpu-spec FILE``: the operator's own models and GPUs in every lab.

The command checks the files before any worker starts and names them in
environment variables; each worker's ``create_app`` registers them again
(workers are separate processes). Registering the same entry twice is a
no-op; a clash with a different entry of the same id is an error, so a
catalog entry is never silently replaced.
"""

from __future__ import annotations

import os

from engine.gpu_spec import load_gpu_spec, register_gpu
from engine.hardware import GPU, GPUS
from engine.hf_config import load_model_config
from engine.models import MODELS, ModelConfig, register_model

MODEL_CONFIGS_ENV = "PDLAB_MODEL_CONFIGS"
GPU_SPECS_ENV = "PDLAB_GPU_SPECS"


def env_paths(name: str) -> list[str]:
    """The file paths an environment variable names (``os.pathsep``-separated)."""
    return [p for p in os.environ.get(name, "").split(os.pathsep) if p]


def load_catalog_files(model_paths: list[str], gpu_paths: list[str]) -> tuple[list[ModelConfig], list[GPU]]:
    """Read and check the files; nothing is registered.

    Raises:
        engine.hf_config.ConfigError: a file is unreadable or invalid.
        ValueError: two entries, or an entry and a catalog one, share an id.
    """
    models = [load_model_config(p) for p in model_paths]
    gpus = [load_gpu_spec(p).gpu for p in gpu_paths]
    for kind, entries, catalog in (("model", models, MODELS), ("gpu", gpus, GPUS)):
        seen: dict[str, object] = {}
        for entry in entries:
            known = seen.get(entry.id, catalog.get(entry.id))
            if entry.id == "custom" or known is not None and known != entry:
                raise ValueError(f"{kind} id {entry.id!r} is already taken; change the file's "
                                 + ("_name_or_path (or its name)" if kind == "model" else "id (or name)"))
            seen[entry.id] = entry
    return models, gpus


def register_catalog_files(model_paths: list[str] | None = None, gpu_paths: list[str] | None = None) -> None:
    """Register the files' models and GPUs (by default those named in the environment).

    Raises:
        engine.hf_config.ConfigError, ValueError: see :func:`load_catalog_files`.
    """
    models, gpus = load_catalog_files(
        env_paths(MODEL_CONFIGS_ENV) if model_paths is None else model_paths,
        env_paths(GPU_SPECS_ENV) if gpu_paths is None else gpu_paths,
    )
    for model in models:
        if MODELS.get(model.id) != model:
            register_model(model)
    for gpu in gpus:
        if GPUS.get(gpu.id) != gpu:
            register_gpu(gpu)
