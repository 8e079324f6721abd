"""Policy-gradient losses: pure tensor functions over ``(B, T)`` token matrices with a response mask.

Contents:

- ``agg_loss``: reduce a per-token loss matrix to a scalar (verl's ``loss_agg_mode``s).
- ``ppo_policy_loss``: PPO clipped surrogate with dual clip and optional importance weights.
- ``value_loss``: clipped critic loss.
- ``kl_penalty``: per-token KL estimators k1/k2/k3 (and verl's aliases).
- ``entropy_from_logits``: per-position entropy of the categorical given by logits.
- ``truncated_is_weights``: capped, detached importance weights for off-policy (replayed) rows.

Definitions follow verl ``verl/trainer/ppo/core_algos.py`` (``agg_loss``,
``compute_policy_loss_vanilla``, ``compute_value_loss``, ``kl_penalty``) and
``verl/utils/torch_functional.py`` (``entropy_from_logits``); see ``docs/reference/algorithms.md`` §3.1.
Metrics are returned as Python floats for logging.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = [
    "AGG_MODES",
    "TRAINING_AGG_MODES",
    "agg_loss",
    "forced_token_mask",
    "ppo_policy_loss",
    "value_loss",
    "kl_penalty",
    "entropy_from_logits",
    "truncated_is_weights",
    "trajectory_is_weights",
]

AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm", "none")
#: The modes a trainer can optimise: ``"none"`` returns a matrix, not a loss to step on.
TRAINING_AGG_MODES = AGG_MODES[:4]
_KL_KINDS = {"k1": "k1", "kl": "k1", "abs": "abs", "k2": "k2", "mse": "k2", "k3": "k3", "low_var_kl": "k3"}
# exp() of a log-ratio beyond +-20 overflows float16 and is meaningless anyway (verl's clamp).
_LOG_RATIO_CLAMP = 20.0


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp_min(1)


def _as_mask(mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    mask = torch.as_tensor(mask, device=like.device).to(like.dtype)
    if mask.shape != like.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match the loss shape {tuple(like.shape)}")
    return mask


def agg_loss(
    loss: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean", *, norm_factor: float | None = None
) -> torch.Tensor:
    """Reduce a ``(B, T)`` per-token loss over the mask to a scalar (verl ``agg_loss``).

    The mode fixes how much each token and each sequence weighs; it changes effective step sizes for
    long vs short rows.

    Args:
        loss: ``(B, T)`` per-token loss.
        mask: ``(B, T)`` 1 where the token counts (bool or 0/1 float).
        mode: ``"token-mean"``: ``sum(L*m) / sum(m)`` (verl and verl-agent default; TRL ``bnpo``).
            ``"seq-mean-token-sum"``: per-sequence ``sum_t L*m``, averaged over sequences with at
            least one token. ``"seq-mean-token-mean"``: per-sequence masked mean (``n_t + 1e-8``),
            averaged over non-empty sequences (TRL ``grpo``). ``"seq-mean-token-sum-norm"``:
            per-sequence ``sum_t L*m / norm_factor``, averaged over non-empty sequences (Dr.GRPO:
            ``1/G sum_i sum_t L / MAX_TOKENS``; verl's ``agg_loss`` with its global batch size and
            ``loss_scale_factor``). ``"none"``: no reduction, the masked matrix ``L*m`` (for
            callers that combine terms per token first).
        norm_factor: the constant divisor of ``seq-mean-token-sum-norm``; default
            ``mask.shape[-1]`` as in verl. Trainers pass ``TrainerConfig.loss_scale_factor``: a
            micro-batch's own (trimmed) width would make the gradient depend on the batching.

    Returns:
        A scalar (``(B, T)`` for ``"none"``). An empty mask gives 0, not NaN.

    >>> L = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    >>> m = torch.tensor([[1, 1, 0], [1, 1, 1]])
    >>> [round(agg_loss(L, m, mode).item(), 4) for mode in AGG_MODES[:4]]
    [3.6, 9.0, 3.25, 3.0]
    """
    mask = _as_mask(mask, loss)
    masked = loss * mask
    if mode == "token-mean":
        return masked.sum() / mask.sum().clamp_min(1)
    if mode == "none":
        return masked
    if loss.dim() < 2:
        raise ValueError(f"agg mode {mode!r} needs a (B, T) loss, got shape {tuple(loss.shape)}")
    seq_tokens = mask.sum(-1)
    if mode == "seq-mean-token-sum":
        seq_loss = masked.sum(-1)
    elif mode == "seq-mean-token-sum-norm":
        seq_loss = masked.sum(-1) / (loss.shape[-1] if norm_factor is None else norm_factor)
    elif mode == "seq-mean-token-mean":
        seq_loss = masked.sum(-1) / (seq_tokens + 1e-8)
    else:
        raise ValueError(f"unknown loss aggregation mode {mode!r}; expected one of {AGG_MODES}")
    nonempty = (seq_tokens > 0).to(loss.dtype)
    return (seq_loss * nonempty).sum() / nonempty.sum().clamp_min(1)


def forced_token_mask(allowed: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """``(B, R)`` True where constrained decoding allowed exactly one id (a forced token).

    Such a token's restricted log-prob is 0 whatever the weights, so it has no gradient, no
    entropy and no KL; counting it in a token-mean denominator only shrinks the step and dilutes
    the logged entropy, KL and clip fraction (69 % of the tiny ALFWorld model's response tokens
    are forced). ``allowed`` is ``TrainingBatch.allowed`` (``(B, R, K)`` ids, ``-1``-padded) or
    None (no constrained row: nothing is forced).

    >>> allowed = torch.tensor([[[5, -1], [5, 6], [-1, -1]]])
    >>> forced_token_mask(allowed, torch.ones(1, 3)).tolist()
    [[True, False, False]]
    """
    if allowed is None:
        return torch.zeros(like.shape, dtype=torch.bool, device=like.device)
    return ((allowed[:, : like.shape[1]] >= 0).sum(-1) == 1).to(like.device)


def ppo_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip: float = 0.2,
    clip_high: float | None = None,
    dual_clip: float | None = 3.0,
    agg: str = "token-mean",
    is_weights: torch.Tensor | None = None,
    norm_factor: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped surrogate with dual clip (verl ``compute_policy_loss_vanilla``).

    ``ratio = exp(clamp(logp - old_logp, -20, 20))``; ``L1 = -A * ratio``;
    ``L2 = -A * clamp(ratio, 1 - clip, 1 + clip_high)``; ``L = max(L1, L2)``. Dual clip (Ye et al.,
    arXiv 1912.09729): for ``A < 0`` the loss is further capped at ``-A * dual_clip``, so a token whose
    ratio exploded cannot dominate the batch.

    Args:
        logp: ``(B, T)`` log-probs of the taken tokens under the current policy (carries the gradient).
        old_logp: ``(B, T)`` log-probs under the behaviour policy that sampled them (no gradient).
        advantages: ``(B,)`` one per row (broadcast over tokens) or ``(B, T)`` per token.
        mask: ``(B, T)`` response mask.
        clip: lower clip range ``eps_low`` (0.2). clip_high: upper range ``eps_high`` (None = ``clip``;
            DAPO's clip-higher uses 0.28).
        dual_clip: the constant ``c > 1`` (3.0); None disables dual clip.
        agg: aggregation mode of :func:`agg_loss`; norm_factor is passed on to it.
        is_weights: optional ``(B, T)`` per-token multiplier of the loss, e.g.
            :func:`truncated_is_weights` for rows replayed from another policy.

    Returns:
        ``(loss, metrics)`` with metrics ``clipfrac`` (share of tokens where the clip bound is active),
        ``approx_kl`` (verl ``ppo_kl``: masked mean of ``old_logp - logp``) and ``clipfrac_lower``
        (share of tokens where the dual clip bound is active).
    """
    log_ratio = torch.clamp(logp - old_logp, -_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
    mask = _as_mask(mask, log_ratio)
    ratio = torch.exp(log_ratio)
    adv = torch.as_tensor(advantages, device=logp.device).to(ratio.dtype)
    if adv.dim() == ratio.dim() - 1:
        adv = adv.unsqueeze(-1)
    if adv.dim() != ratio.dim() or adv.shape[0] != ratio.shape[0]:
        raise ValueError(
            f"advantages must be (B,) or (B, T) for logp of shape {tuple(ratio.shape)}, got {tuple(adv.shape)}"
        )
    high = clip if clip_high is None else clip_high
    loss1 = -adv * ratio
    loss2 = -adv * torch.clamp(ratio, 1.0 - clip, 1.0 + high)
    clipped = torch.maximum(loss1, loss2)
    token_loss = clipped
    clipfrac_lower = torch.zeros((), dtype=ratio.dtype, device=ratio.device)
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1 (verl clip_ratio_c), got {dual_clip}")
        loss3 = -adv * dual_clip
        negative = adv < 0
        token_loss = torch.where(negative, torch.minimum(loss3, clipped), clipped)
        clipfrac_lower = _masked_mean(((clipped > loss3) & negative).to(ratio.dtype), mask)
    if is_weights is not None:
        token_loss = token_loss * is_weights
    loss = agg_loss(token_loss, mask, agg, norm_factor=norm_factor)
    metrics = {
        "clipfrac": float(_masked_mean((loss2 > loss1).to(ratio.dtype), mask)),
        "approx_kl": float(_masked_mean(-log_ratio.detach(), mask)),
        "clipfrac_lower": float(clipfrac_lower),
    }
    return loss, metrics


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip: float | None = 0.5,
    agg: str = "token-mean",
    norm_factor: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped critic loss ``0.5 * agg(max((v - R)^2, (v_clip - R)^2))`` (verl ``compute_value_loss``).

    ``v_clip = clamp(v, old_v - clip, old_v + clip)`` keeps one update from moving a value estimate
    far from the one the advantages were computed with.

    Args:
        values: ``(B, T)`` current critic predictions (carries the gradient).
        old_values: ``(B, T)`` predictions at rollout time.
        returns: ``(B, T)`` targets (the ``returns`` of :func:`~rspo_gym.algos.advantages.gae_advantages`).
        mask: ``(B, T)`` response mask.
        clip: value clip range (verl-agent ``cliprange_value`` 0.5); None disables clipping.
        agg: as in :func:`agg_loss`.
        norm_factor: as in :func:`agg_loss`.

    Returns:
        ``(loss, metrics)`` with ``vf_clipfrac``: share of tokens where the clipped term is larger.
    """
    err = (values - returns) ** 2
    clipped_values = values if clip is None else torch.clamp(values, old_values - clip, old_values + clip)
    err_clipped = (clipped_values - returns) ** 2
    mask = _as_mask(mask, err)
    loss = 0.5 * agg_loss(torch.maximum(err, err_clipped), mask, agg, norm_factor=norm_factor)
    return loss, {"vf_clipfrac": float(_masked_mean((err_clipped > err).to(err.dtype), mask))}


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k1") -> torch.Tensor:
    """Per-token estimate of ``KL(pi || pi_ref)`` from sampled-token log-probs (verl ``kl_penalty``).

    With ``d = logp - ref_logp`` (Schulman, "Approximating KL divergence", 2020):
    ``"k1"``/``"kl"``: ``d`` (unbiased, high variance, can be negative); ``"abs"``: ``|d|``;
    ``"k2"``/``"mse"``: ``d^2 / 2``; ``"k3"``/``"low_var_kl"``: ``exp(-d) + d - 1``, computed as
    verl does with the log-ratio clamped to ``[-20, 20]`` and the result to ``[-10, 10]`` (unbiased,
    low variance, non-negative; the verl-agent scripts use it with coefficient 0.01). A ``"+"`` suffix
    (e.g. ``"k3+"``) keeps the forward value but takes the gradient of k2 (straight-through), as in verl.

    Args:
        logp: ``(B, T)`` (any shape) log-probs under the current policy.
        ref_logp: log-probs under the reference policy, same shape.
        kind: estimator name, see above.

    Returns:
        Per-token KL estimate, same shape; mask and aggregate with :func:`agg_loss`.

    >>> p, ref = torch.tensor([0.3]).log(), torch.tensor([0.5]).log()
    >>> [round(kl_penalty(p, ref, k).item(), 6) for k in ("k1", "k2", "k3")]
    [-0.510826, 0.130471, 0.155841]
    """
    straight_through = kind.endswith("+")
    name = _KL_KINDS.get(kind[:-1] if straight_through else kind)
    if name is None:
        raise ValueError(
            f"unknown KL estimator {kind!r}; expected one of {tuple(_KL_KINDS)}, optionally with a '+' suffix"
        )
    diff = logp - ref_logp
    if name == "k1":
        value = diff
    elif name == "abs":
        value = diff.abs()
    elif name == "k2":
        value = 0.5 * diff.square()
    else:
        u = torch.clamp(-diff, -_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
        value = torch.clamp(torch.exp(u) - u - 1, -10.0, 10.0)
    if straight_through:
        k2 = 0.5 * diff.square()
        return k2 + (value - k2).detach()
    return value


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the categorical over the last dimension, per position: ``(..., V) -> (...)``.

    Computed from ``log_softmax`` so large logits do not overflow; ``-inf`` logits (vocabulary masks)
    contribute exactly 0 and keep the gradient finite (``0 * log 0`` would give NaN).

    >>> entropy_from_logits(torch.zeros(2, 4))
    tensor([1.3863, 1.3863])
    """
    logp = F.log_softmax(logits, dim=-1)
    finite_logp = logp.clamp_min(torch.finfo(logp.dtype).min)
    return -(logp.exp() * finite_logp).sum(-1)


def truncated_is_weights(
    logp: torch.Tensor, behaviour_logp: torch.Tensor, mask: torch.Tensor, *, cap: float = 2.0
) -> torch.Tensor:
    """Per-token truncated importance weights ``min(pi / mu, cap)`` for off-policy rows, detached.

    RSPO's replayed explorer rows were sampled by another policy ``mu``; weighting their PPO loss by
    ``pi/mu`` corrects the sampling, and the cap bounds the variance (truncated IS, as in IMPALA/V-trace,
    arXiv 1802.01561). Detached because the weight corrects the sampling distribution, it is not an
    objective to optimize.

    Args:
        logp: ``(B, T)`` log-probs under the current policy.
        behaviour_logp: ``(B, T)`` log-probs under the policy that sampled the tokens.
        mask: ``(B, T)`` response mask; masked positions get weight 0.
        cap: truncation level (2, ``RSPOConfig.is_cap``'s default, or ``1 + 0.28``).

    Returns:
        ``(B, T)`` weights, pass as ``is_weights`` to :func:`ppo_policy_loss`.
    """
    log_ratio = torch.clamp(logp.detach() - behaviour_logp.detach(), -_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
    return torch.exp(log_ratio).clamp_max(cap) * _as_mask(mask, log_ratio)


def trajectory_is_weights(
    logp: torch.Tensor, behaviour_logp: torch.Tensor, mask: torch.Tensor, traj_ids: torch.Tensor, *, cap: float = 2.0
) -> torch.Tensor:
    """Per-trajectory truncated importance weights ``min(prod_t pi / mu, cap)``, detached: every
    token of a trajectory's rows gets the ratio of the whole trajectory's probabilities.

    The unbiased correction for a trajectory-level advantage (the outcome paid once), but its
    variance grows exponentially with length: over 50 steps the product is almost always far
    below 1 or capped. Offered beside the per-step weights (:func:`truncated_is_weights`) for
    comparison (``RSPOConfig.is_level``).

    >>> lp = torch.tensor([[-1.0], [-1.0], [-2.0]]); mu = torch.tensor([[-1.5], [-1.5], [-2.0]])
    >>> trajectory_is_weights(lp, mu, torch.ones(3, 1), torch.tensor([0, 0, 1]), cap=5.0).flatten().tolist()
    [2.7182817459106445, 2.7182817459106445, 1.0]
    """
    m = _as_mask(mask, logp)
    log_ratio = torch.clamp(logp.detach() - behaviour_logp.detach(), -_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP) * m
    _, inverse = torch.unique(traj_ids, return_inverse=True)
    per_traj = torch.zeros(int(inverse.max()) + 1, dtype=log_ratio.dtype).index_add_(0, inverse, log_ratio.sum(-1))
    weight = torch.exp(torch.clamp(per_traj, max=math.log(cap)))[inverse]
    return weight[:, None] * m
