"""Encoders: an observation (tensor or dict, shell/observations.py) -> features ``[B, F]`` float32.

The seam of Stable-Baselines3's features extractors (``NatureCNN``, ``CombinedExtractor``) as
plain functions that build modules from an :class:`~shell.observations.ObsLayout`:

- flat and one-hot parts pass through unchanged (the heads' MLPs do the work, as for vectors
  before encoders existed, so vector policies compute exactly what they did);
- an image part goes through a CNN: channels-last images are transposed to ``[C, H, W]``, pixels
  are scaled (uint8 by 1/255 unless ``policy.image_scale`` says otherwise), symbolic grids can be
  one-hot encoded or embedded per channel (``policy.image_encoding = "onehot"`` or ``"embed"``);
- a Dict gets one encoder per key, features concatenated in the layout's key order.

Every encoder announces ``features_dim``.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch import nn

from shell.config import PolicyConfig
from shell.errors import ConfigError
from shell.observations import MIN_IMAGE_SIZE, ObsLayout, ObsPart
from shell.policies.layers import init_layer

NATURE_MIN_SIZE = 36  # the Nature CNN's 8x8/4, 4x4/2, 3x3/1 stack needs at least 36x36


def channels_first(shape: tuple[int, int, int], override: bool | None = None) -> bool:
    """Whether an image of ``shape`` is ``[C, H, W]``.

    Detected from the space: channels last when the last axis is <= 4 and the first is not
    (``(84, 84, 4)``, MiniGrid's ``(7, 7, 3)``); ``[C, H, W]`` otherwise (``(4, 84, 84)``).
    ``override`` (``policy.image_channels_first``) wins when given.
    """
    if override is not None:
        return bool(override)
    return not (shape[-1] <= 4 and shape[0] > 4)


def nature_cnn(in_channels: int) -> nn.Sequential:
    """The convolutional trunk of "Human-level control through deep reinforcement learning",
    Mnih et al., Nature 2015: 32 8x8/4, 64 4x4/2, 64 3x3/1, ReLU; orthogonal init (gain sqrt 2)."""
    gain = np.sqrt(2)
    return nn.Sequential(
        init_layer(nn.Conv2d(in_channels, 32, 8, stride=4), gain), nn.ReLU(),
        init_layer(nn.Conv2d(32, 64, 4, stride=2), gain), nn.ReLU(),
        init_layer(nn.Conv2d(64, 64, 3, stride=1), gain), nn.ReLU(),
        nn.Flatten(),
    )


def small_cnn(in_channels: int, size: int) -> nn.Sequential:
    """A CNN for small grids such as MiniGrid's 7x7 view, after the minigrid authors' rl-starter-files
    model: a 2x2 convolution of 16 channels, a 2x2 max-pool (when the map is at least 6 wide, so 7x7
    becomes 3x3), then 2x2 convolutions of 32 and 64 channels; ReLU, orthogonal init (gain sqrt 2).
    ``size`` is the image's smaller side (at least 4)."""
    gain = np.sqrt(2)
    layers: list[nn.Module] = [init_layer(nn.Conv2d(in_channels, 16, 2), gain), nn.ReLU()]
    if size - 1 >= 6:
        layers.append(nn.MaxPool2d(2))
    layers += [init_layer(nn.Conv2d(16, 32, 2), gain), nn.ReLU(),
               init_layer(nn.Conv2d(32, 64, 2), gain), nn.ReLU(), nn.Flatten()]
    return nn.Sequential(*layers)


def board_cnn(in_channels: int, channels: list[int]) -> nn.Sequential:
    """A CNN for board games: 3x3 convolutions with padding 1 (``channels`` wide, one layer each), so every
    layer keeps the board's height and width and each cell keeps a feature vector of its own, as in the
    convolutional trunk of AlphaZero (Silver et al., Science 2018) without its residual blocks and batch
    norm; ReLU, orthogonal init (gain sqrt 2). ``[B, C, H, W]`` -> ``[B, channels[-1] * H * W]``."""
    gain = np.sqrt(2)
    layers: list[nn.Module] = []
    for width in channels:
        layers += [init_layer(nn.Conv2d(in_channels, width, 3, padding=1), gain), nn.ReLU()]
        in_channels = width
    return nn.Sequential(*layers, nn.Flatten())


class ImageEncoder(nn.Module):
    """A Box image ``[B, H, W, C]`` or ``[B, C, H, W]`` (uint8 or float) -> features ``[B, F]`` float32.

    Pixels are scaled inside the network (storage keeps uint8). With ``onehot`` encoding each
    channel's integer codes ``0..codes-1`` become ``codes`` binary planes (``C * codes`` input
    channels): symbolic grids such as MiniGrid's (object, colour, state) codes are categories, not
    intensities, and dividing them by 255 would squeeze them into [0, 0.04]. ``embed`` encoding
    maps each cell to the sum of a learned vector per (channel, code) (``image_embed_dim`` wide):
    the same function as one-hot planes followed by a 1x1 convolution, at a fraction of the cost of
    convolving ``C * codes`` planes. The Nature CNN adds
    its 512-unit linear layer; the small and board CNNs' flattened maps are the features.

    The CNN runs in the channels_last memory format. With ``policy.cnn_precision = "bfloat16"``
    (or ``"auto"`` on a device that computes bfloat16 natively, see :func:`native_bfloat16`)
    it runs under bfloat16 autocast (parameters and gradients stay float32; the features are
    returned as float32, so heads, losses and the optimiser are unchanged), everywhere the policy
    is evaluated: rollout, update, evaluation and deployment alike.
    """

    def __init__(self, part: ObsPart, cfg: PolicyConfig):
        super().__init__()
        shape = part.shape
        self.channels_first = channels_first(shape, cfg.image_channels_first)
        c, h, w = shape if self.channels_first else (shape[2], shape[0], shape[1])
        self.encoding = cfg.image_encoding
        self.codes = cfg.image_codes
        if self.encoding == "embed":
            # channel k's code j -> row k * codes + j; a cell's vector is the sum over its channels
            self.embedding = nn.Embedding(c * self.codes, cfg.image_embed_dim)
            self.register_buffer("code_offset", torch.arange(c) * self.codes, persistent=False)
        if cfg.image_scale is not None:
            self.scale = float(cfg.image_scale)
        else:
            self.scale = 1.0 / 255.0 if part.dtype == torch.uint8 else 1.0
        if min(h, w) < MIN_IMAGE_SIZE:
            raise ConfigError(f"an image of shape {list(shape)} read as {c} channels of {h}x{w} is too small for a "
                              f"CNN (at least {MIN_IMAGE_SIZE}x{MIN_IMAGE_SIZE}); check policy.image_channels_first")
        kind = cfg.cnn if cfg.cnn != "auto" else ("nature" if min(h, w) >= NATURE_MIN_SIZE else "small")
        if kind == "nature" and min(h, w) < NATURE_MIN_SIZE:
            raise ConfigError(f"policy.cnn = 'nature' needs images of at least {NATURE_MIN_SIZE}x{NATURE_MIN_SIZE}, "
                              f"got {h}x{w}; use 'small' or 'auto'")
        in_channels = {"onehot": c * self.codes, "embed": cfg.image_embed_dim}.get(self.encoding, c)
        if kind == "nature":
            trunk = nature_cnn(in_channels)
        elif kind == "board":
            trunk = board_cnn(in_channels, cfg.cnn_channels)
        else:
            trunk = small_cnn(in_channels, min(h, w))
        with torch.no_grad():
            flat = trunk(torch.zeros(1, in_channels, h, w)).shape[1]
        if kind == "nature":
            self.net = nn.Sequential(trunk, init_layer(nn.Linear(flat, 512), np.sqrt(2)), nn.ReLU())
            self.features_dim = 512
        else:
            self.net = trunk
            self.features_dim = int(flat)
        self.kind = kind
        self.precision = cfg.cnn_precision
        self.net.to(memory_format=torch.channels_last)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        if not self.channels_first:
            image = image.permute(0, 3, 1, 2)
        if self.encoding == "onehot":
            b, c, h, w = image.shape
            codes = image.long().clamp_(0, self.codes - 1)
            x = nn.functional.one_hot(codes, self.codes).permute(0, 1, 4, 2, 3).reshape(b, c * self.codes, h, w)
            x = x.float()
        elif self.encoding == "embed":
            codes = image.long().clamp_(0, self.codes - 1).permute(0, 2, 3, 1) + self.code_offset  # [B, H, W, C]
            x = self.embedding(codes).sum(3).permute(0, 3, 1, 2)  # [B, D, H, W]
        else:  # to channels_last while still uint8 (2x faster than permuting while converting), then the scale
            x = image.contiguous(memory_format=torch.channels_last).to(torch.float32, copy=True)
            if self.scale != 1.0:
                x.mul_(self.scale)
        # channels_last: oneDNN's fast layout for convolutions on the CPU (the same values either way)
        x = x.contiguous(memory_format=torch.channels_last)
        if not uses_bfloat16(self.precision, x.device):
            return self.net(x)
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            return self.net(x).float()


def native_bfloat16(device: torch.device) -> bool:
    """Whether ``device`` computes bfloat16 convolutions natively: a CUDA device with bfloat16, or a CPU
    whose oneDNN has bfloat16 kernels (AVX-512 or AMX). Elsewhere bfloat16 is emulated and slow: on an
    AVX2-only CPU one Nature-CNN update of Pong took 6.7x as long as in float32 (bench/BENCHMARKS.md)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        try:
            return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        except (AttributeError, RuntimeError):
            return False
    return False


def uses_bfloat16(precision: str, device: torch.device) -> bool:
    """``policy.cnn_precision`` on ``device``: ``"bfloat16"`` always, ``"auto"`` where it is native."""
    if precision == "auto":
        return _native(device.type)
    return precision == "bfloat16"


@functools.cache
def _native(device_type: str) -> bool:
    return native_bfloat16(torch.device(device_type))


class Identity(nn.Module):
    """Flat and one-hot parts: the features are the (already flat, normalised) observation."""

    def __init__(self, size: int):
        super().__init__()
        self.features_dim = size

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs


class DictEncoder(nn.Module):
    """One encoder per key; features concatenated in key order: ``{key: [B, ...]}`` -> ``[B, sum F_k]``."""

    def __init__(self, layout: ObsLayout, cfg: PolicyConfig):
        super().__init__()
        self.encoders = nn.ModuleDict({key: _part_encoder(part, cfg) for key, part in layout.parts.items()})
        self.features_dim = sum(e.features_dim for e in self.encoders.values())

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([encoder(obs[key]) for key, encoder in self.encoders.items()], dim=-1)


def _part_encoder(part: ObsPart, cfg: PolicyConfig) -> nn.Module:
    return ImageEncoder(part, cfg) if part.kind == "image" else Identity(part.shape[0])


def make_encoder(layout: ObsLayout, cfg: PolicyConfig) -> nn.Module:
    """The encoder for an observation layout (see the module docstring); it has ``features_dim``.

    Raises:
        ConfigError: ``policy.cnn = "nature"`` for images smaller than 36x36.
    """
    if layout.is_dict:
        return DictEncoder(layout, cfg)
    return _part_encoder(layout.parts[None], cfg)


def has_image(layout: ObsLayout) -> bool:
    return any(part.kind == "image" for part in layout.parts.values())
