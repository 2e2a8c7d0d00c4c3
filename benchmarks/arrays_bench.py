"""Tree write cost vs raw numpy, and pickled size of shared trees.

Prints human-readable lines, then as its last line one JSON object with
``tree_write_us``, ``numpy_write_us``, ``tree_write_ratio``,
``pickle_bytes_small`` and ``pickle_bytes_large``.

Usage: python benchmarks/arrays_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median_time, pin_threads, print_result  # noqa: E402

from parllel.tree import buffer_from_example  # noqa: E402


def step_example() -> dict:
    """A typical 5-leaf step: vector obs, reward, two flags, discrete action."""
    return {
        "observation": np.zeros(4, np.float32),
        "reward": np.float32(0.0),
        "terminated": False,
        "truncated": False,
        "action": np.int64(0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny run for tests")
    args = parser.parse_args()
    pin_threads()
    repeats, number = (3, 2_000) if args.quick else (9, 100_000)

    example = step_example()
    tree = buffer_from_example(example, (128, 8), storage="shared")
    raw = {
        k: np.zeros((128, 8) + np.shape(v), np.asarray(v).dtype)
        for k, v in example.items()
    }
    step = {
        "observation": np.ones(4, np.float32),
        "reward": np.float32(1.0),
        "terminated": True,
        "truncated": False,
        "action": np.int64(1),
    }

    def tree_write() -> None:
        tree[7, 3] = step

    def numpy_write() -> None:
        for key, leaf in raw.items():
            leaf[7, 3] = step[key]

    tree_us = median_time(tree_write, repeats, number) * 1e6
    numpy_us = median_time(numpy_write, repeats, number) * 1e6
    tree.close()

    sizes = {}
    for name, rows in (("small", 64), ("large", 64 * 256)):  # 1 MB and 256 MB
        big = buffer_from_example(
            {f"leaf{i}": np.zeros(1024, np.float32) for i in range(4)},
            (rows,),
            storage="shared",
        )
        sizes[name] = len(pickle.dumps(big))
        big.close()
    print(f"tree[t, b] = step: {tree_us:.3f} us; 5 numpy writes: {numpy_us:.3f} us")
    print(
        f"pickled shared tree: 1 MB -> {sizes['small']} B, 256 MB -> {sizes['large']} B"
    )
    print_result(
        {
            "tree_write_us": round(tree_us, 4),
            "numpy_write_us": round(numpy_us, 4),
            "tree_write_ratio": round(tree_us / numpy_us, 3),
            "pickle_bytes_small": sizes["small"],
            "pickle_bytes_large": sizes["large"],
        }
    )


if __name__ == "__main__":
    main()
