"""Ray, an optional dependency (``pip install "spacy-arboel[ray]"``): importing it with a
message that says how to install it, and joining or starting a cluster for our workers."""

from __future__ import annotations

from typing import Any

from .errors import Errors

# one thread per worker: Ray places one worker per CPU it counts
WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def import_ray() -> Any:
    """Ray, or E128 saying how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ImportError(Errors.E128) from None
    return ray


def start_ray(address: str | None = None, num_cpus: int | None = None) -> Any:
    """Ray, initialised unless it already is: joining the cluster at ``address`` (e.g.
    ``auto``), else starting a local one with ``num_cpus``."""
    ray = import_ray()
    if not ray.is_initialized():
        ray.init(address=address, num_cpus=None if address else num_cpus,
                 include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": WORKER_ENV})
    return ray
