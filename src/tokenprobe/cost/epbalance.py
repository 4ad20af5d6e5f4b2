"""Expert load imbalance under expert parallelism, and the reach of group-limited routing.

Imbalance. Every MoE layer waits for the GPU that received the most routed rows: it computes
the most expert rows and receives the most dispatched (and sends back the most combined)
copies. LMSYS defines the balancedness of a layer as mean / max of the GPUs' token counts
(lm-sys/lm-sys.github.io@2db4e4042b31f3c3c9f4f93068ae80946d25a115:blog/2025-05-05-large-scale-
ep.md, "Expert Parallelism Load Balancer"); the factor priced here is its inverse,

    f = max_g L_g / mean_g L_g   (L_g: routed copies that land on GPU g in one step).

A GPU holds e = (E + r)/n expert slots. In a step of T tokens (all ranks) each routed to k
experts, expert j receives a share w_j/E of the T·k copies, w log-normal over the experts with
mean 1 and σ the engine profile's `routing_skew` (the same within-batch popularity
ops.expected_distinct_experts reads; coefficient of variation cv² = exp(σ²) − 1). Two sources
of spread in L_g, relative to its mean μ = T·k/n:

- popularity: the e experts of a GPU are a draw of the E without regard to their load (the
  engines place expert i on GPU ⌊i/e⌋), so L_g/μ has variance (cv²/e)·(E − e)/(E − 1) (the
  mean of e draws without replacement);
- sampling: given the shares, the copies are a multinomial draw: variance (1 − 1/n)/μ.

The largest of n such loads is about μ·(1 + z'·s), s the square root of the summed variance
and z' the expected maximum of n standard normals (Blom's approximation
z_n = Φ⁻¹((n − 0.375)/(n + 0.25)); Blom 1958, "Statistical Estimates and Transformed
Beta-Variables") moved by the load's skewness γ, z' = z_n + (z_n² − 1)·γ/6 (Cornish-Fisher to
first order): a sum of a few log-normal loads has a long right tail (skewness (e^σ² + 2)·
√(e^σ² − 1)/√e), the copies' Poisson spread 1/√μ. Capped at n (one GPU receiving everything).
A Monte Carlo of the popularity and the multinomial draw (2,000 steps) gives 1.454 for 256
experts over 32 GPUs at 4,096 tokens a GPU and σ = 0.5 (this formula 1.447; without the skew
term 1.384) and 1.818 for 288 over 72 at 256 tokens a GPU, σ = 0.491 (1.79; 1.62). At σ = 0 only
the sampling term is left, which is what LMSYS's "simulated perfect EPLB" (random expert
selection) leaves: at 16,384 tokens a GPU over 32 GPUs, 1.0056 (Monte Carlo 1.0058).

EPLB (`EpComm.balanced`: redundant experts, or `--enable-eplb`) places the experts by their
measured loads and replicates the hottest (deepseek-ai/EPLB@d52c72d5b2f2fb4c41afbf8eb2136682023
9913d:README.md), which balances the part of the popularity that persists between the
statistics and the step; what changes from batch to batch it cannot see ("Even with EPLB,
some imbalance is inevitable": LMSYS blog). `EPLB_BALANCED_SHARE` is that persistent part of
the popularity variance (its derivation is at the constant). Not modelled: group-limited
routing's correlation of a token's experts (it widens the spread between nodes), and the
slowest GPU for weight reads (ops.slowest_gpu_experts) being taken as the slowest for rows too
(an upper bound on the pair).

Group-limited routing (DeepSeek-V3 report arXiv:2412.19437 sec. 2.1.2: each token's experts
come from at most M nodes; the inference configs' `n_group` G = 8 / `topk_group` M = 4: the
top-k are chosen among the experts of the M groups with the highest scores, transformers
`DeepseekV3TopkRouter` / vLLM `grouped_topk`). The engines place experts contiguously, so a
group's E/G experts sit on consecutive GPUs and, when a domain holds whole groups, on one node
(EPLB's hierarchical policy keeps that: deepseek-ai/EPLB README). The chance that a set of
`held` experts (one GPU's, one domain's) holds one of a token's k experts, taking the M groups
uniform and each chosen group contributing k/M of its experts:

    held ≥ E/G (h = held·G/E whole groups):  1 − C(G − h, M)/C(G, M)
    held < E/G (a part of one group):        (M/G)·(1 − C(E/G − held, k/M)/C(E/G, k/M))

which for G = 1 is the uniform 1 − C(E − held, k)/C(E, k). DeepSeek-V3 on 4 HGX nodes (G = 8,
M = 4, 2 groups a node): a domain is reached with 1 − C(6, 4)/C(8, 4) = 55/70 = 0.786 (uniform:
0.90), so a token crosses the NIC to 3·0.786 = 2.36 other nodes, not 2.71, and never more than
min(M, m − 1).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tokenprobe.cost.deployment import Deployment
    from tokenprobe.model import MoeSpec

# The share of the within-batch popularity variance that EPLB's placement removes. Derived from
# LMSYS's controlled pair on 4 x 8 H100 (EP32, DeepSeek-V3, 4,096-token prompts, 16,384 tokens a
# GPU, EPLB over 288 experts from in-distribution statistics): 50,302 tokens/s a node with the
# real routing, 59,337 with random routing (blog, "Overall Throughput"): a step 1.180 times
# longer from the imbalance EPLB left. In this cost model (the sglang profile, σ = 0.491, 9
# slots a GPU) random routing gives f = 1.006, the popularity unbalanced f = 1.408 and a step
# 1.258 times longer; the share that leaves 1.180 is 0.511 (f = 1.285): benchmarks/
# ep_imbalance.py derives it. The LMSYS prefill rows are therefore not held out for this one
# constant; the EP72 decode row (another phase, scale and batch) and the other sources are.
# LMSYS's EPLB ablation (1.49x prefill, 2.54x decode "in large-scale settings", configuration
# not stated) implies a larger persistent part than 0.51 of this σ; not reproduced here.
EPLB_BALANCED_SHARE = 0.51


def expected_max_normal(n: int) -> float:
    """Expected largest of n standard normals, Blom's approximation (module docstring)."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def popularity_cv2(routing_skew: float) -> float:
    """Squared coefficient of variation of a log-normal popularity of log-σ `routing_skew`."""
    return math.expm1(routing_skew * routing_skew)


def physical_experts(dep: Deployment) -> int:
    """Routed experts placed over the EP GPUs: the model's plus EPLB's redundant copies."""
    moe = dep.model.moe
    return 0 if moe is None else moe.num_experts + dep.ep_comm.redundant_experts


def ep_imbalance(dep: Deployment, step_tokens: Any) -> Any:
    """max / mean routed copies over the EP GPUs in a step of `step_tokens` tokens (all ranks'
    tokens; a float or a numpy array), 1 without expert parallelism (module docstring)."""
    moe = dep.model.moe
    n = dep.tp
    if moe is None or n <= 1 or not dep.expert_parallel:
        return 1.0
    slots = physical_experts(dep)
    per_gpu = slots / n
    cv2 = popularity_cv2(dep.efficiency.routing_skew)
    pop = cv2 / per_gpu * max(0.0, (slots - per_gpu) / (slots - 1))
    if dep.ep_comm.balanced:
        pop *= 1.0 - EPLB_BALANCED_SHARE
    # skewness of a GPU's mean of e log-normal loads: (e^σ² + 2)·√(e^σ² − 1) / √e
    pop_skew = (cv2 + 3.0) * math.sqrt(cv2) / math.sqrt(per_gpu)
    copies = np.asarray(step_tokens, dtype=float) * moe.experts_per_token / n
    return _largest(n, pop, pop_skew, copies)


def random_routing_imbalance(gpus: int, copies_per_gpu: float) -> float:
    """max / mean copies over `gpus` GPUs under uniform random routing (the sampling term
    alone): what DeepEP's tests, whose scores are random, leave in the rates they report."""
    return float(_largest(gpus, 0.0, 0.0, np.asarray(copies_per_gpu, dtype=float)))


def _largest(n: int, pop: float, pop_skew: float, mean_copies: Any) -> Any:
    """1 + z'·√(popularity variance + sampling variance), capped at n, z' the expected maximum
    of n normals moved by the load's skewness γ (Cornish-Fisher, first order: z + (z² − 1)·γ/6)
    (module docstring)."""
    mu = np.maximum(mean_copies, 1.0)
    sampling = (1.0 - 1.0 / n) / mu
    var = pop + sampling
    # the two parts' third moments add: γ = (γ_p·v_p^1.5 + γ_s·v_s^1.5) / v^1.5, γ_s = 1/√μ
    skew = (pop_skew * pop**1.5 + sampling**1.5 / np.sqrt(mu)) / var**1.5
    z = expected_max_normal(n)
    f = np.minimum(1.0 + (z + (z * z - 1.0) * skew / 6.0) * np.sqrt(var), float(n))
    return float(f) if np.ndim(f) == 0 else f


def _miss(experts: float, held: float, k: int) -> float:
    """C(E − held, k) / C(E, k): the chance none of k picks of E lands among `held` of them
    (`held` may be fractional: the product form of the ratio)."""
    return math.prod(max(0.0, (experts - held - i) / (experts - i)) for i in range(k))


def reach_probability(moe: MoeSpec, held: float) -> float:
    """The chance that `held` consecutive experts hold one of a token's k experts under the
    model's group-limited routing (module docstring; uniform routing when ungrouped)."""
    groups, chosen = moe.expert_groups, moe.groups_per_token
    k, experts = moe.experts_per_token, moe.num_experts
    group_size = experts / groups
    if held >= group_size:
        return 1.0 - _miss(groups, held / group_size, chosen)
    picks = max(1, round(k / chosen))
    return chosen / groups * (1.0 - _miss(group_size, held, picks))
