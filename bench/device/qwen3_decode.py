"""A Qwen3-8B-shaped decode loop in plain PyTorch (random BF16 weights), profiled from process start.

The device check's application: ``tracekit analyze`` reads the trace it writes, and the ``ncu`` command
tracekit nominates is then run on this same program with ``--no-profile``. The profiler is started
before the first CUDA call, so every kernel launch of the process is in the trace and the launch index
tracekit derives for ``--launch-skip`` counts from the process's first launch, as ncu counts.
ProfilerStep#0 holds model set-up and prefill; every later step is one decode step of the whole batch,
ending with the sampled tokens copied to the host, as a serving loop does. With ``--graphs`` each decode
step is captured as a CUDA graph during set-up and replayed, as serving engines do; with
``--decode-attention math`` decode attention runs unfused (PyTorch's math SDPA, K/V expanded per head),
a deliberately slow kernel class.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# Qwen3-8B (floor/data/models.toml): 36 layers, d_model 4096, FFN 12288, 32 heads, 8 KV heads, head_dim 128.
VOCAB, D_MODEL, FFN, N_HEADS, N_KV_HEADS, HEAD_DIM = 151936, 4096, 12288, 32, 8, 128
ROPE_THETA = 1_000_000.0
EPS = 1e-6


@dataclass
class Layer:
    """One decoder layer's weights, each ``[out_features, in_features]`` as F.linear takes them."""
    attn_norm: torch.Tensor
    wqkv: torch.Tensor
    q_norm: torch.Tensor
    k_norm: torch.Tensor
    wo: torch.Tensor
    mlp_norm: torch.Tensor
    w_gate_up: torch.Tensor
    w_down: torch.Tensor


def weight(*shape: int) -> torch.Tensor:
    return torch.randn(*shape) * 0.02


def build(n_layers: int) -> tuple[torch.Tensor, list[Layer], torch.Tensor, torch.Tensor]:
    """Embedding, layers, final norm and LM head on the current default device and dtype."""
    qkv_out = (N_HEADS + 2 * N_KV_HEADS) * HEAD_DIM
    layers = [Layer(torch.ones(D_MODEL), weight(qkv_out, D_MODEL), torch.ones(HEAD_DIM), torch.ones(HEAD_DIM),
                    weight(D_MODEL, N_HEADS * HEAD_DIM), torch.ones(D_MODEL), weight(2 * FFN, D_MODEL),
                    weight(D_MODEL, FFN)) for _ in range(n_layers)]
    return weight(VOCAB, D_MODEL), layers, torch.ones(D_MODEL), weight(VOCAB, D_MODEL)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding on ``[batch, heads, tokens, head_dim]`` (half-split layout, as Qwen3)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def layer_forward(layer: Layer, h: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, pos: int,
                  cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """One layer over ``h`` [batch, tokens, d_model] whose first token sits at ``pos``; fills the cache."""
    batch, tokens, _ = h.shape
    x = F.rms_norm(h, (D_MODEL,), layer.attn_norm, EPS)
    q, k, v = F.linear(x, layer.wqkv).split([N_HEADS * HEAD_DIM, N_KV_HEADS * HEAD_DIM, N_KV_HEADS * HEAD_DIM], -1)
    q = F.rms_norm(q.view(batch, tokens, N_HEADS, HEAD_DIM), (HEAD_DIM,), layer.q_norm, EPS).transpose(1, 2)
    k = F.rms_norm(k.view(batch, tokens, N_KV_HEADS, HEAD_DIM), (HEAD_DIM,), layer.k_norm, EPS).transpose(1, 2)
    k_cache[:, :, pos:pos + tokens] = rope(k, cos, sin)
    v_cache[:, :, pos:pos + tokens] = v.view(batch, tokens, N_KV_HEADS, HEAD_DIM).transpose(1, 2)
    attn = F.scaled_dot_product_attention(rope(q, cos, sin), k_cache[:, :, :pos + tokens],
                                          v_cache[:, :, :pos + tokens], is_causal=tokens > 1, enable_gqa=True)
    h = h + F.linear(attn.transpose(1, 2).reshape(batch, tokens, N_HEADS * HEAD_DIM), layer.wo)
    gate, up = F.linear(F.rms_norm(h, (D_MODEL,), layer.mlp_norm, EPS), layer.w_gate_up).chunk(2, dim=-1)
    return h + F.linear(F.silu(gate) * up, layer.w_down)


def capture(fn: Callable[[], torch.Tensor]) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """``fn`` captured as a CUDA graph after one eager run on a side stream (libraries plan their kernels for
    the shapes then, outside the capture); returns the graph and its output tensor."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", help="write the PyTorch-profiler trace here (.json or .json.gz)")
    parser.add_argument("--no-profile", action="store_true", help="run the same launches without the profiler")
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=8, help="decode steps after the prefill step")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--graphs", action="store_true", help="replay each decode step as a CUDA graph")
    parser.add_argument("--warm-graphs", action="store_true",
                        help="replay each graph once during set-up: a graph's first launch uploads it to the GPU "
                             "(milliseconds for ~1000 nodes), which serving engines pay once, not per step")
    parser.add_argument("--decode-attention", choices=["default", "math"], default="default",
                        help="SDPA backend for decode steps: PyTorch's choice, or the unfused math path")
    args = parser.parse_args()

    prof = None
    if not args.no_profile:
        from torch.profiler import ProfilerActivity, profile, schedule
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
        prof = profile(activities=activities, schedule=schedule(wait=0, warmup=0, active=args.steps + 1, repeat=1),
                       on_trace_ready=lambda p: p.export_chrome_trace(args.trace))
        prof.start()

    torch.manual_seed(0)
    torch.set_default_device(args.device)
    torch.set_default_dtype(torch.bfloat16)
    embed, layers, final_norm, lm_head = build(args.layers)
    max_tokens = args.prompt + args.steps
    caches = [(torch.zeros(args.batch, N_KV_HEADS, max_tokens, HEAD_DIM),
               torch.zeros(args.batch, N_KV_HEADS, max_tokens, HEAD_DIM)) for _ in layers]
    inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM)
    angles = torch.outer(torch.arange(max_tokens, dtype=torch.float32), inv_freq)
    cos_all = torch.cat((angles, angles), -1).cos().to(torch.bfloat16)
    sin_all = torch.cat((angles, angles), -1).sin().to(torch.bfloat16)

    def forward(tokens: torch.Tensor, pos: int) -> torch.Tensor:
        n = tokens.shape[1]
        cos, sin = cos_all[pos:pos + n], sin_all[pos:pos + n]
        h = F.embedding(tokens, embed)
        unfused = n == 1 and args.decode_attention == "math"
        with sdpa_kernel(SDPBackend.MATH) if unfused else nullcontext():
            for layer, (k_cache, v_cache) in zip(layers, caches, strict=True):
                h = layer_forward(layer, h, k_cache, v_cache, pos, cos, sin)
        logits = F.linear(F.rms_norm(h[:, -1], (D_MODEL,), final_norm, EPS), lm_head)
        return logits.argmax(dim=-1, keepdim=True)

    with torch.inference_mode():
        prompt = torch.randint(0, VOCAB, (args.batch, args.prompt))
        token = forward(prompt, 0)
        token.cpu()
        step_input = token.clone()
        graphs = [capture(lambda pos=args.prompt + i: forward(step_input, pos)) for i in range(args.steps)] \
            if args.graphs or args.warm_graphs else []
        if args.warm_graphs:
            for graph, _ in graphs:
                graph.replay()
            step_input.cpu()
        if prof:
            prof.step()
        for i in range(args.steps):
            if graphs:
                graph, out = graphs[i]
                graph.replay()
                step_input.copy_(out)
            else:
                step_input = forward(step_input, args.prompt + i)
            step_input.cpu()  # the serving loop reads the sampled tokens back every step
            if prof:
                prof.step()
    if prof:
        prof.stop()


if __name__ == "__main__":
    main()
