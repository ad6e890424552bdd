"""Real model providers behind `domain.models.Model`, chosen by a "provider:model" string.

    openai:gpt-4.1-mini          OpenAI (OPENAI_API_KEY, optional OPENAI_BASE_URL)
    anthropic:claude-sonnet-4-5  Anthropic (ANTHROPIC_API_KEY, optional ANTHROPIC_BASE_URL)
    ollama:llama3.1              a local Ollama (OLLAMA_BASE_URL, default http://localhost:11434/v1)
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from interlock.domain.errors import ConfigurationError
from interlock.domain.runtime.models import Model
from interlock.providers.anthropic import AnthropicModel
from interlock.providers.openai import OpenAIModel
from interlock.providers.retry import RetryPolicy

OLLAMA_BASE_URL = "http://localhost:11434/v1"

__all__ = [
    "OLLAMA_BASE_URL",
    "AnthropicModel",
    "OpenAIModel",
    "ProviderConfigError",
    "RetryPolicy",
    "resolve_model",
]


class ProviderConfigError(ConfigurationError):
    """A model string or the environment names no usable provider: a deployer's mistake."""


def resolve_model(
    spec: str, *, env: Mapping[str, str] | None = None, retry: RetryPolicy | None = None
) -> Model:
    """The model a "provider:model" string names, configured from the environment."""
    env = os.environ if env is None else env
    provider, _, name = spec.partition(":")
    if not name:
        raise ProviderConfigError(f"model {spec!r} must look like 'provider:model'")
    if provider == "openai":
        return OpenAIModel(name, api_key=_required(env, "OPENAI_API_KEY"),
                           base_url=env.get("OPENAI_BASE_URL"), retry=retry)
    if provider == "anthropic":
        return AnthropicModel(name, api_key=_required(env, "ANTHROPIC_API_KEY"),
                              base_url=env.get("ANTHROPIC_BASE_URL"), retry=retry)
    if provider == "ollama":
        # Ollama ignores the key, but the OpenAI client insists on one.
        return OpenAIModel(name, api_key=env.get("OLLAMA_API_KEY", "ollama"),
                           base_url=env.get("OLLAMA_BASE_URL", OLLAMA_BASE_URL),
                           retry=retry, provider="ollama")
    raise ProviderConfigError(
        f"unknown model provider {provider!r} in {spec!r} (use openai, anthropic or ollama)")


def _required(env: Mapping[str, str], key: str) -> str:
    value = env.get(key)
    if not value:
        raise ProviderConfigError(f"{key} is not set")
    return value
