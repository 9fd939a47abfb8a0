"""The recurrent core of the policy stack: an LSTM or GRU between the encoder and the heads.

One rule decides when a state restarts, and the rollout (one step at a time) and the update
(sequences replayed from stored start states) both go through :meth:`RecurrentCore.forward`:

    state_t = 0 if episode_start_t else state_{t-1}

where ``episode_start_t`` says that the observation at step t is the first of its episode.
With gymnasium's SAME_STEP autoreset that is "the sub-env's episode ended at step t-1". A sub-env's
state is a row of its own: nothing is shared across sub-envs.
"""

from __future__ import annotations

import torch
from torch import nn


class RecurrentCore(nn.Module):
    """An LSTM or GRU over features, with the state of each sub-env packed in one row.

    The packed state is ``[B, S]`` float32: ``[h, c]`` (``S = 2H``) for an LSTM, ``h`` (``S = H``)
    for a GRU. Weights are orthogonal (gain 1) and biases zero, as CleanRL's ppo_atari_lstm and
    "What Matters in On-Policy RL?" (Andrychowicz et al., 2020: arXiv:2006.05990) use.

    Args:
        kind: ``"lstm"`` or ``"gru"``.
        input_size: the encoder's feature width F.
        hidden_size: H, the width of the output and of h (and c).
    """

    def __init__(self, kind: str, input_size: int, hidden_size: int):
        super().__init__()
        if kind not in ("lstm", "gru"):
            raise ValueError(f"RecurrentCore kind must be 'lstm' or 'gru', got {kind!r}")
        self.kind = kind
        self.hidden_size = hidden_size
        self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(input_size, hidden_size)
        for name, param in self.rnn.named_parameters():
            if name.startswith("weight"):
                nn.init.orthogonal_(param, 1.0)
            else:
                nn.init.zeros_(param)
        self.state_size = 2 * hidden_size if kind == "lstm" else hidden_size

    def _step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step ``x [B, F]`` from ``state [B, S]``: the fused cell on the RNN's own weights (about 3x
        faster than a length-1 ``nn.LSTM`` call, which matters once per env step)."""
        rnn = self.rnn
        weights = (rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0)
        if self.kind == "lstm":
            h, c = torch.lstm_cell(x, tuple(state.chunk(2, dim=-1)), *weights)
            return h, torch.cat((h, c), dim=-1)
        h = torch.gru_cell(x, state, *weights)
        return h, h

    def _pack_state(self, state: torch.Tensor):
        if self.kind == "lstm":
            h, c = state.chunk(2, dim=-1)
            return h.unsqueeze(0).contiguous(), c.unsqueeze(0).contiguous()
        return state.unsqueeze(0).contiguous()

    def _unpack_state(self, state) -> torch.Tensor:
        return torch.cat((state[0][0], state[1][0]), dim=-1) if self.kind == "lstm" else state[0]

    def forward(self, x: torch.Tensor, state: torch.Tensor,
                episode_start: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Run a sequence, restarting each row's state where its episode starts.

        Args:
            x: features ``[L, B, F]`` float32 (L = 1 for a rollout step).
            state: ``[B, S]`` float32, the state before step 0 (before the reset rule).
            episode_start: ``[L, B]`` bool, the observation at step t is its episode's first.

        Returns:
            ``(out [L, B, H], state [B, S])``, the state after step L-1.

        A restart multiplies the state by zero, so gradients stop there as they should. The
        sequence is cut where any row restarts and each piece runs as one ``nn.LSTM``/``nn.GRU``
        call; finding the cuts is one host read per sequence batch (L > 1). (Packing every episode
        fragment into one call was 1.5-5x slower on the CPU, measured forward and backward on
        ``[32, 8]`` to ``[128, 4]`` sequences.)
        """
        if x.shape[0] == 1:
            out, state = self._step(x[0], state * (~episode_start[0]).unsqueeze(-1).to(state.dtype))
            return out.unsqueeze(0), state
        keep = (~episode_start).unsqueeze(-1).to(state.dtype)  # [L, B, 1]
        cuts = episode_start[1:].any(dim=1).nonzero().flatten().add(1).tolist()
        outs = []
        for t0, t1 in zip([0, *cuts], [*cuts, x.shape[0]], strict=True):
            out, packed = self.rnn(x[t0:t1], self._pack_state(state * keep[t0]))
            state = self._unpack_state(packed)
            outs.append(out)
        return torch.cat(outs), state
