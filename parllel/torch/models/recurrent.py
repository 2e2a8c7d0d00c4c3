"""Recurrent core: an LSTM or GRU that zeroes its state where episodes start.

State representation (the same for both cells): a tuple of tensors, each
``[num_layers, B, hidden_size]``: ``(h,)`` for a GRU, ``(h, c)`` for an LSTM.
For storage in a sample tree (``INITIAL_STATE`` is ``[B, ...]``) use
:meth:`RecurrentCore.state_to_batch_first` / :meth:`state_from_batch_first`,
which convert to and from one tensor ``[B, num_states, num_layers, hidden_size]``.
"""

from __future__ import annotations

import torch
from torch import nn

from parllel.errors import ConfigError, ShapeError

__all__ = ["RecurrentCore", "RecurrentState"]

RecurrentState = tuple[torch.Tensor, ...]
"""``(h,)`` (GRU) or ``(h, c)`` (LSTM), each ``[num_layers, B, hidden_size]``."""


class RecurrentCore(nn.Module):
    """An ``nn.LSTM`` or ``nn.GRU`` over ``[T, B, F]`` with episode resets.

    ``resets[t, b]`` is True when step ``t`` of column ``b`` starts a new
    episode: the state entering step ``t`` is zeroed for that column, exactly
    as if the new episode were a separate sequence. Without resets (or with
    resets only at ``t = 0``) the whole sequence runs in one fused call; with
    resets inside it, the sequence is cut at every time step where any column
    resets and each piece runs in one call.

    Example:
        >>> core = RecurrentCore(input_size=8, hidden_size=16, cell="lstm")
        >>> out, state = core(torch.zeros(5, 3, 8), resets=torch.zeros(5, 3, dtype=torch.bool))
        >>> out.shape, state[0].shape
        (torch.Size([5, 3, 16]), torch.Size([1, 3, 16]))

    Args:
        input_size: feature size ``F`` of the inputs.
        hidden_size: hidden size ``H``.
        num_layers: number of stacked layers.
        cell: ``"lstm"`` or ``"gru"``.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        cell: str = "lstm",
    ) -> None:
        super().__init__()
        if cell not in ("lstm", "gru"):
            raise ConfigError(f"cell must be 'lstm' or 'gru', got {cell!r}")
        if min(input_size, hidden_size, num_layers) <= 0:
            raise ConfigError(
                "RecurrentCore sizes must be positive: "
                f"input_size={input_size}, hidden_size={hidden_size}, "
                f"num_layers={num_layers}"
            )
        rnn_class = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn_class(input_size, hidden_size, num_layers)
        self.cell = cell
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = hidden_size
        self.num_layers = num_layers
        self.num_states = 2 if cell == "lstm" else 1

    def initial_state(
        self, batch_size: int, device: torch.device | str | None = None
    ) -> RecurrentState:
        """Zero state for ``batch_size`` columns."""
        shape = (self.num_layers, batch_size, self.hidden_size)
        return tuple(torch.zeros(shape, device=device) for _ in range(self.num_states))

    def forward(
        self,
        inputs: torch.Tensor,
        state: RecurrentState | None = None,
        resets: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, RecurrentState]:
        """Run the core over a sequence.

        Args:
            inputs: ``[T, B, input_size]``.
            state: state entering step 0 (zeros if None).
            resets: optional ``[T, B]`` bool; True where a new episode starts.

        Returns:
            ``(outputs [T, B, hidden_size], state after step T - 1)``.
        """
        if inputs.dim() != 3:
            raise ShapeError(
                f"RecurrentCore expects inputs [T, B, F]; got {tuple(inputs.shape)}"
            )
        T, B = inputs.shape[:2]
        if state is None:
            state = self.initial_state(B, inputs.device)
        state = tuple(state)
        if resets is None:
            return self._run(inputs, state)
        if resets.shape != (T, B):
            raise ShapeError(
                f"resets must be [T, B] = {(T, B)}; got {tuple(resets.shape)}"
            )
        resets = resets.to(torch.bool)
        # Time steps where any column starts a new episode cut the sequence.
        cuts = torch.nonzero(resets[1:].any(dim=1)).flatten().add(1).tolist()
        bounds = [0, *cuts, T]
        outputs: list[torch.Tensor] = []
        for start, stop in zip(bounds[:-1], bounds[1:]):
            keep = (~resets[start]).to(inputs.dtype).view(1, B, 1)  # [1, B, 1]
            state = tuple(s * keep for s in state)
            out, state = self._run(inputs[start:stop], state)
            outputs.append(out)
        output = outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=0)
        return output, state  # [T, B, H]

    def _run(
        self, inputs: torch.Tensor, state: RecurrentState
    ) -> tuple[torch.Tensor, RecurrentState]:
        if self.cell == "lstm":
            outputs, (h, c) = self.rnn(inputs, (state[0], state[1]))
            return outputs, (h, c)
        outputs, h = self.rnn(inputs, state[0])
        return outputs, (h,)

    def state_to_batch_first(self, state: RecurrentState) -> torch.Tensor:
        """Pack a state into one tensor ``[B, num_states, num_layers, H]`` for storage."""
        return torch.stack(state, dim=0).permute(2, 0, 1, 3)

    def state_from_batch_first(self, packed: torch.Tensor) -> RecurrentState:
        """Inverse of :meth:`state_to_batch_first`."""
        expected = (self.num_states, self.num_layers, self.hidden_size)
        if tuple(packed.shape[1:]) != expected:
            raise ShapeError(
                f"packed state must be [B, {expected[0]}, {expected[1]}, "
                f"{expected[2]}]; got {tuple(packed.shape)}"
            )
        unpacked = packed.permute(1, 2, 0, 3)  # [num_states, num_layers, B, H]
        return tuple(s.contiguous() for s in unpacked)
