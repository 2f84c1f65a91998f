# SPDX-License-Identifier: BSD-3-Clause
"""The two small models the example workers run, CPU-only, random weights
from fixed random-number generator states (nothing is downloaded):

- VisionEncoder: a vision-encoder-shaped module - patch embedding,
  convolution-and-MLP blocks over the patch grid, and a 2x2 patch merger
  that projects into the language model's hidden size, the way
  Qwen2-VL-style encoders produce one embedding per merged patch.
- TinyLM: a decoder-only transformer prefill over received embeddings -
  sliding-window causal attention with multimodal rotary positions
  (temporal, height, width sections of each head), and tensor parallelism
  over ranks (each rank holds its share of the heads and of the MLP; the
  partial outputs are summed with torch.distributed).

Also what the encode side derives from a request (the synthetic image,
the placeholder ids, the positions) and the digest that travels in the
aux record's cookie.
"""
import hashlib
import math

import torch
import torch.nn.functional as F
from torch import nn

PATCH = 4           # pixels per patch side
MERGE = 2           # patches per merged token side
IMAGE_PAD_ID = 151655  # the placeholder id of an image token in fill_ids
ENCODER_SEED = 1234
LM_SEED = 4321


def grid_of(n):
    """(rows, cols) of merged tokens for an image of n tokens: the most
    square factorisation of n."""
    rows = int(math.isqrt(n))
    while n % rows:
        rows -= 1
    return rows, n // rows


def synthetic_image(request_id, n):
    """The request's image: 3 channels, sized so that it encodes into
    exactly n tokens, pixels drawn from a generator seeded by the id."""
    rows, cols = grid_of(n)
    side = PATCH * MERGE
    g = torch.Generator().manual_seed(request_id & (2 ** 63 - 1))
    return torch.rand(3, rows * side, cols * side, generator=g)


def placement(n):
    """What the language side needs besides the embeddings: fill ids (the
    image placeholder at every position), mrope positions (temporal,
    row, column of each token) and the mrope delta (how far the positions
    after the image lag behind the token count)."""
    rows, cols = grid_of(n)
    r = torch.arange(rows, dtype=torch.int32).repeat_interleave(cols)
    c = torch.arange(cols, dtype=torch.int32).repeat(rows)
    mrope = torch.stack([torch.zeros_like(r), r, c], dim=1).contiguous()
    fill = torch.full((n,), IMAGE_PAD_ID, dtype=torch.int32)
    delta = max(rows, cols) - n
    return fill, mrope, delta


def digest(*tensors):
    """64 bits of BLAKE2b over the tensors' bytes, in order: the encoder
    puts it in the aux record's cookie, the language ranks recompute it
    over what they received."""
    h = hashlib.blake2b(digest_size=8)
    for t in tensors:
        t = t.contiguous()
        if t.dtype.is_floating_point:
            t = t.view({1: torch.int8, 2: torch.int16,
                        4: torch.int32}[t.element_size()])
        h.update(t.numpy().tobytes())
    return int.from_bytes(h.digest(), "little")


class _Block(nn.Module):
    """A depthwise convolution over the patch grid (spatial mixing), then
    a per-patch MLP, each with a residual."""

    def __init__(self, dim):
        super().__init__()
        self.norm1 = nn.GroupNorm(1, dim)
        self.mix = nn.Conv2d(dim, dim, 3, padding=1, groups=dim)
        self.norm2 = nn.GroupNorm(1, dim)
        self.fc1 = nn.Conv2d(dim, 2 * dim, 1)
        self.fc2 = nn.Conv2d(2 * dim, dim, 1)

    def forward(self, x):
        x = x + self.mix(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class VisionEncoder(nn.Module):
    """(3, H, W) image -> (H/8 * W/8, hidden) embeddings, row-major."""

    def __init__(self, hidden, dim=32, depth=2, seed=ENCODER_SEED):
        super().__init__()
        torch.manual_seed(seed)
        self.patch = nn.Conv2d(3, dim, PATCH, stride=PATCH)
        self.blocks = nn.Sequential(*[_Block(dim) for _ in range(depth)])
        self.merge = nn.Sequential(nn.LayerNorm(dim * MERGE * MERGE),
                                   nn.Linear(dim * MERGE * MERGE, hidden))

    @torch.no_grad()
    def forward(self, image):
        x = self.blocks(self.patch(image[None]))[0]        # (dim, h, w)
        dim, h, w = x.shape
        x = x.view(dim, h // MERGE, MERGE, w // MERGE, MERGE)
        x = x.permute(1, 3, 2, 4, 0).reshape((h // MERGE) * (w // MERGE),
                                             MERGE * MERGE * dim)
        return self.merge(x)


def _rope(x, pos, sections):
    """Rotary embedding with multimodal positions: the head's rotary
    pairs are cut into sections, section i turned by position column i.
    x (tokens, heads, head_dim); pos (tokens, 3)."""
    half = x.shape[-1] // 2
    inv = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float32) / half))
    which = torch.repeat_interleave(torch.arange(len(sections)),
                                    torch.tensor(sections))
    ang = pos.float()[:, which] * inv                       # (tokens, half)
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def _window_attention(q, k, v, window):
    """Causal attention where each token sees the `window` tokens up to
    itself; chunked so that memory stays O(tokens * window).
    q, k, v: (heads, tokens, head_dim)."""
    n = q.shape[1]
    out = torch.empty_like(q)
    scale = q.shape[-1] ** -0.5
    for s in range(0, n, window):
        e = min(s + window, n)
        lo = max(0, s - window)
        scores = q[:, s:e] @ k[:, lo:e].transpose(1, 2) * scale
        qi = torch.arange(s, e)[:, None]
        ki = torch.arange(lo, e)[None, :]
        scores.masked_fill_((ki > qi) | (ki <= qi - window), float("-inf"))
        out[:, s:e] = scores.softmax(-1) @ v[:, lo:e]
    return out


class TinyLM(nn.Module):
    """A decoder-only prefill over input embeddings of width `hidden`
    (projected to the model's width `dim` first), this rank's share of it:
    heads [rank * H/nranks, (rank+1) * H/nranks) and the same share of the
    MLP's columns. Every rank builds the whole model from the seed and
    keeps its slices, so the ranks agree without loading anything.
    forward() returns the last position's logits; `all_reduce` sums a
    tensor over the ranks in place (None: one rank)."""

    def __init__(self, hidden, dim=128, heads=4, layers=2, vocab=1024,
                 window=64, rank=0, nranks=1, seed=LM_SEED):
        super().__init__()
        if heads % nranks or dim % heads:
            raise ValueError("heads must divide among %d ranks and dim "
                             "among heads" % nranks)
        g = torch.Generator().manual_seed(seed)

        def rnd(*shape):
            return torch.randn(*shape, generator=g) / shape[-1] ** 0.5
        self.hd = dim // heads
        self.window = window
        self.local = heads // nranks
        half = self.hd // 2
        self.sections = [half - 2 * (half // 3), half // 3, half // 3]
        lo, hi = rank * self.local * self.hd, (rank + 1) * self.local * self.hd
        ff = 2 * dim
        flo, fhi = rank * ff // nranks, (rank + 1) * ff // nranks
        self.proj = rnd(dim, hidden)
        self.layers = []
        for _ in range(layers):
            qkv, o, up, down = rnd(3, dim, dim), rnd(dim, dim), \
                rnd(ff, dim), rnd(dim, ff)
            self.layers.append({"qkv": qkv[:, lo:hi].clone(),
                                "o": o[:, lo:hi].clone(),
                                "up": up[flo:fhi].clone(),
                                "down": down[:, flo:fhi].clone()})
        self.lm_head = rnd(vocab, dim)

    @torch.no_grad()
    def forward(self, emb, mrope, all_reduce=None):
        x = emb.float() @ self.proj.t()
        n = x.shape[0]
        for p in self.layers:
            h = F.layer_norm(x, x.shape[-1:])
            q, k, v = (h @ w.t() for w in p["qkv"])
            q, k, v = (t.view(n, self.local, self.hd) for t in (q, k, v))
            q, k = _rope(q, mrope, self.sections), _rope(k, mrope,
                                                         self.sections)
            a = _window_attention(q.transpose(0, 1), k.transpose(0, 1),
                                  v.transpose(0, 1), self.window)
            part = a.transpose(0, 1).reshape(n, -1) @ p["o"].t()
            if all_reduce:
                all_reduce(part)
            x = x + part
            h = F.layer_norm(x, x.shape[-1:])
            part = F.gelu(h @ p["up"].t()) @ p["down"].t()
            if all_reduce:
                all_reduce(part)
            x = x + part
        return F.layer_norm(x[-1], x.shape[-1:]) @ self.lm_head.t()


def requests(base, lengths, repeat=1):
    """The workload both sides agree on: (request id, tokens) pairs. An
    id is `base << 40 | index << 32 | tokens`, so each run's ids differ
    and a log line names the length."""
    lengths = list(lengths) * repeat
    if not 0 < base < 1 << 24 or len(lengths) > 256:
        raise ValueError("base must be 1..2^24-1 and at most 256 requests")
    if any(not 0 < n < 1 << 32 for n in lengths):
        raise ValueError("lengths must be 1..2^32-1 tokens")
    return [(base << 40 | i << 32 | n, n) for i, n in enumerate(lengths)]
