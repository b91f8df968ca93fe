"""GLM-5.2 (shrunk) #48407: how far the dense MHA prefill's layer-0 attention input moves from the absorbed MQA one
on a block-FP8 checkpoint, emulated on a CPU: `python3 fp8_rounding.py` (needs torch).

The dense path runs `kv_b_proj` on `kv_c_normed` (vllm/model_executor/layers/attention/mla_attention.py:2458,
`forward_mha`), a block-FP8 linear that quantizes its input to e4m3 per token and group of 128 (`activation_scheme:
dynamic`, `weight_block_size: [128, 128]`); the MQA path multiplies by the same weights dequantized to bf16 and never
quantizes that input. Same weights on both sides, so the gap is the activation's FP8 rounding alone.
"""

import torch

torch.manual_seed(0)
tokens, latent, out = 2048, 512, 16 * (192 + 256)  # GLM-5.2 shrunk: kv_lora_rank 512; 16 heads of k_nope 192 + v 256
x = torch.randn(tokens, latent)  # RMS-normed latent: unit scale
w = torch.randn(latent, out) * 0.02


def e4m3_per_group(t: torch.Tensor, group: int = 128) -> torch.Tensor:
    g = t.view(t.shape[0], -1, group)
    scale = g.abs().amax(-1, keepdim=True) / 448.0  # e4m3's largest finite value
    return ((g / scale).to(torch.float8_e4m3fn).float() * scale).view_as(t)


exact, rounded = x @ w, e4m3_per_group(x) @ w
print(f"kv_b_proj output, relative L2: {float((rounded - exact).norm() / exact.norm()):.4f}")
