"""Bring your own model: a run that starts from a Hugging Face folder trains that folder's model.

``tw-jax train --gin_file=lora.gin --gin.INITIAL_CHECKPOINT_PATH=/models/Llama-3.2-1B`` needs
no model gin file: ``lora.gin`` names T5-large as its model, but a start from a Hugging Face
folder (``config.json`` + safetensors) of another family means the folder's model, read from
its ``config.json`` (its ``tokenizer.json``, where it has one, becomes the model's vocabulary:
:func:`tw_jax.models.hf_folder_config`). The run's settings (precision, rematerialisation, the
method's variant and freeze: :class:`tw_jax.models.ModelSettings`) then apply to it as to any
model. Where the gin model is of the folder's family already (``models/gpt2_large.gin`` with
the ``gpt2-large`` folder, ``models/llama3_2_1b.gin`` with ``Llama-3.2-1B``) it stays the run's
model, as the files describe it (a shape the folder lacks is then the start's new-parameter
check's to refuse), and it takes the folder's tokenizer if it names none.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from tw_jax.data.model_folder import is_model_folder

log = logging.getLogger(__name__)


def _family(config: Any) -> type:
    from tw_jax.models import model_for

    return type(model_for(config))


def model_of_start(model_config: Any, initial_checkpoint: str | None,
                   settings: Any = None) -> Any:
    """The model a run starting from ``initial_checkpoint`` trains (see the module docstring);
    ``settings(config) -> config`` gives a model built from the folder the run's settings."""
    if not is_model_folder(initial_checkpoint):
        return model_config
    from tw_jax.models import hf_folder_config

    folder_config = hf_folder_config(initial_checkpoint)
    if model_config is not None and _family(model_config) is _family(folder_config):
        tokenizer = getattr(folder_config, "tokenizer", None)
        if tokenizer is not None and getattr(model_config, "tokenizer", "") is None:
            return dataclasses.replace(model_config, tokenizer=tokenizer)
        return model_config
    if model_config is not None:
        log.info("the model is %s's (%s from its config.json), not gin's MODEL (a %s)",
                 initial_checkpoint, type(folder_config).__name__, type(model_config).__name__)
    return settings(folder_config) if settings is not None else folder_config
