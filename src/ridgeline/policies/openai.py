"""The ``openai`` policy: any OpenAI-compatible chat-completions endpoint with native tool calling.

Works with the OpenAI API, vLLM, SGLang and other servers that speak ``POST /v1/chat/completions``.

Retries. The client's own retries are switched off; this module retries 408/409/429/5xx responses,
timeouts and connection errors with exponential backoff and full jitter (``delay = U(0.5, 1) *
min(backoff_max_s, backoff_base_s * 2**attempt)``, or the server's ``Retry-After`` when it sends one,
capped at ``backoff_max_s``), up to ``max_attempts`` requests. Then it raises
:class:`~ridgeline.errors.PolicyServiceError`: an infrastructure failure, never a wrong answer.
Retries stop at the episode deadline; a request is never given longer than the time left.

Other 4xx answers are not retried: a context-length rejection becomes :class:`ContextLengthExceeded`
(status ``context_overflow``); 401/403/404 (bad key, unknown model) are the service's failure as seen
from the trial, so they are :class:`PolicyServiceError`; any other 4xx is a :class:`PolicyError`.

Usage records ``prompt_tokens``, ``completion_tokens`` and ``prompt_tokens_details.cached_tokens``;
cost comes from :mod:`ridgeline.policies.pricing`.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import openai

from ridgeline.errors import ConfigError, PolicyError, PolicyServiceError
from ridgeline.policies.base import (
    BasePolicy,
    ContextLengthExceeded,
    Message,
    PolicyDeadlineExceeded,
    PolicyOutput,
    ToolCall,
    ToolSchema,
    Usage,
)
from ridgeline.policies.pricing import cost_usd
from ridgeline.policies.spec import OpenAIConfig, register_policy

_RETRY_STATUS = frozenset({408, 409, 429})
_SERVICE_STATUS = frozenset({401, 403, 404})
_CONTEXT_MARKERS = (
    "context length",
    "context_length",
    "maximum context",
    "too many tokens",
    "prompt is too long",
)
#: Below this many seconds left before the deadline, no new request is sent.
_MIN_REQUEST_S = 0.5


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class OpenAIPolicy(BasePolicy):
    """Chat completions over HTTP with the official ``openai`` client. Thread-safe."""

    def __init__(
        self,
        config: OpenAIConfig,
        *,
        client: openai.OpenAI | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.base_url = config.base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._client = client or openai.OpenAI(
            base_url=self.base_url,
            api_key=self._api_key(),
            max_retries=0,
            timeout=config.timeout_s,
        )

    def _api_key(self) -> str:
        if self.config.api_key is not None:
            return self.config.api_key.get_secret_value()
        key = os.environ.get(self.config.api_key_env)
        if key:
            return key
        if self.base_url:
            # Self-hosted servers (vLLM, SGLang) usually need no key, but the client insists on one.
            return "EMPTY"
        raise ConfigError(
            f"openai:{self.config.model}: no API key: set {self.config.api_key_env}, or give a base URL "
            "(openai:MODEL@http://host:port/v1) for a server that needs none"
        )

    def close(self) -> None:
        self._client.close()

    def _request(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> dict[str, Any]:
        c = self.config
        body: dict[str, Any] = {"model": c.model, "messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
            if c.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = c.parallel_tool_calls
        for name in ("temperature", "top_p", "max_tokens", "seed"):
            value = getattr(c, name)
            if value is not None:
                body[name] = value
        if c.logprobs:
            body["logprobs"] = True
        if c.extra_body:
            body["extra_body"] = dict(c.extra_body)
        return body

    def _backoff(self, attempt: int, hint: float | None) -> float:
        c = self.config
        if hint is not None:
            return min(hint, c.backoff_max_s)
        return min(c.backoff_max_s, c.backoff_base_s * float(2**attempt)) * self._rng.uniform(0.5, 1.0)

    def act(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> PolicyOutput:
        c = self.config
        body = self._request(messages, tools)
        last: str = "no request was sent"
        for attempt in range(c.max_attempts):
            timeout = c.timeout_s
            cut_by_deadline = False
            if deadline is not None:
                left = deadline - time.monotonic()
                if left < _MIN_REQUEST_S:
                    if attempt == 0:
                        raise PolicyDeadlineExceeded(
                            "the episode deadline passed before the model was called"
                        )
                    raise PolicyServiceError(
                        f"openai:{c.model}: gave up at the episode deadline after {attempt} attempts; "
                        f"last error: {last}"
                    )
                if left < timeout:
                    timeout, cut_by_deadline = left, True
            hint: float | None = None
            try:
                response = self._client.chat.completions.create(**body, timeout=timeout)
                return self._parse(response)
            except openai.APITimeoutError:
                if cut_by_deadline:
                    raise PolicyDeadlineExceeded(
                        f"the model did not answer within the {timeout:.1f} s left in the episode"
                    ) from None
                last = f"request timed out after {timeout:g} s"
            except openai.APIConnectionError as exc:
                last = f"connection error: {exc}"
            except openai.APIStatusError as exc:
                status = exc.status_code
                detail = _error_detail(exc)
                if status in _RETRY_STATUS or status >= 500:
                    last = f"HTTP {status}: {detail}"
                    hint = _retry_after(exc)
                elif status == 400 and any(m in detail.lower() for m in _CONTEXT_MARKERS):
                    raise ContextLengthExceeded(f"openai:{c.model}: {detail}") from None
                elif status in _SERVICE_STATUS:
                    raise PolicyServiceError(f"openai:{c.model}: HTTP {status}: {detail}") from None
                else:
                    raise PolicyError(
                        f"openai:{c.model}: request rejected (HTTP {status}): {detail}"
                    ) from None
            if attempt + 1 < c.max_attempts:
                delay = self._backoff(attempt, hint)
                if deadline is not None:
                    delay = min(delay, max(0.0, deadline - time.monotonic()))
                self._sleep(delay)
        raise PolicyServiceError(
            f"openai:{c.model}: failed after {c.max_attempts} attempts; last error: {last}"
        )

    def _parse(self, response: Any) -> PolicyOutput:
        c = self.config
        usage = _usage(getattr(response, "usage", None))
        model = getattr(response, "model", None) or c.model
        cost, priced = 0.0, False
        if usage is not None:
            cost, priced = cost_usd(c.model, usage, c.price)
            if not priced and model != c.model:
                cost, priced = cost_usd(model, usage)
        choices = getattr(response, "choices", None) or []
        if not choices:
            return PolicyOutput(usage=usage, cost_usd=cost, priced=priced, model=model)
        choice = choices[0]
        msg = choice.message
        calls = []
        for i, tc in enumerate(getattr(msg, "tool_calls", None) or []):
            fn = getattr(tc, "function", None)
            name = getattr(fn, "name", None) or ""
            arguments = getattr(fn, "arguments", None)
            calls.append(ToolCall.from_raw(getattr(tc, "id", None) or f"call_{i}", name, arguments or "{}"))
        logprobs = None
        content_lp = getattr(getattr(choice, "logprobs", None), "content", None)
        if content_lp:
            logprobs = [float(t.logprob) for t in content_lp]
        extra = getattr(choice, "model_extra", None) or {}
        token_ids = extra.get("token_ids")
        prompt_ids = (getattr(response, "model_extra", None) or {}).get("prompt_token_ids")
        reasoning = (getattr(msg, "model_extra", None) or {}).get("reasoning_content")
        return PolicyOutput(
            text=msg.content or "",
            tool_calls=calls,
            usage=usage,
            token_ids=list(token_ids) if isinstance(token_ids, list) else None,
            logprobs=logprobs,
            prompt_token_ids=list(prompt_ids) if isinstance(prompt_ids, list) else None,
            cost_usd=cost,
            priced=priced,
            model=model,
            finish_reason=getattr(choice, "finish_reason", None),
            reasoning=reasoning if isinstance(reasoning, str) else None,
        )


def _usage(u: Any) -> Usage | None:
    if u is None:
        return None
    details = getattr(u, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return Usage(
        prompt_tokens=int(getattr(u, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(u, "completion_tokens", 0) or 0),
        cached_tokens=int(cached or 0),
    )


def _error_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
    return str(exc.message)[:500]


@register_policy("openai", OpenAIConfig)
def build_openai(config: OpenAIConfig) -> OpenAIPolicy:
    return OpenAIPolicy(config)
