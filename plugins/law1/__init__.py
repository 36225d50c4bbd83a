"""Law 1 — incoherence rotation helps full-rank tensors and destroys low-rank ones (seed 000).

Not implemented yet: this package registers no law, so it contributes no anchors and no verdicts.
Its anchors need the effective rank of real low-rank tensors (MLA KV latents) and perplexity on real
models; see the open issues for the plan.
"""
