"""Per actor, the batch requests sent and not answered yet, in batch order."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any


class RequestQueues:
    """The requests in flight at each actor (Ray object refs, oldest first).

    Args:
        n_actors: number of actors.
        max_in_flight: requests waiting at one actor at most.
        send: ``send(actor_index)`` sends one request and returns its ref.
    """

    def __init__(
        self, n_actors: int, max_in_flight: int, send: Callable[[int], Any]
    ) -> None:
        self.max_in_flight = max_in_flight
        self._send = send
        self._queues: list[deque[tuple[int, Any]]] = [deque() for _ in range(n_actors)]
        self._next = [0] * n_actors

    def fill(self, allowed: Callable[[int], bool]) -> None:
        """Send, per actor, the next batches' requests while ``allowed(batch
        number)`` and fewer than ``max_in_flight`` wait."""
        for index, queue in enumerate(self._queues):
            while len(queue) < self.max_in_flight and allowed(self._next[index]):
                queue.append((self._next[index], self._send(index)))
                self._next[index] += 1

    def oldest(self, index: int) -> tuple[int, Any] | None:
        """(batch number, ref) of actor ``index``'s oldest request, or None."""
        queue = self._queues[index]
        return queue[0] if queue else None

    def answered(self, index: int) -> None:
        """Actor ``index``'s oldest request was answered."""
        self._queues[index].popleft()

    def send_again(self, index: int) -> None:
        """Send every request of actor ``index`` again (it died or restarts)."""
        queue = self._queues[index]
        numbers = [number for number, _ in queue]
        queue.clear()
        queue.extend((number, self._send(index)) for number in numbers)

    def in_flight(self) -> list[int]:
        """Requests waiting at each actor."""
        return [len(queue) for queue in self._queues]
