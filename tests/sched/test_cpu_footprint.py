"""A model Ollama runs on the CPU reports `size_vram: 0` in /api/ps (0.34.4, captures/engines/
ollama/v0.34.4/loaded/api_ps: "size_vram":0 beside "size":721231542). That 0 is real, but it is
not the model's footprint: it holds its size in host memory. Read as the footprint, every
loaded model on a CPU host held nothing, so Pharos never saw that a cold load unloads one."""

from __future__ import annotations

import pytest

from pharos.engine.types import Residency
from tests.sched.fakes import GB
from tests.sched.test_placement import evicts_loaded_of, ollama_view


@pytest.mark.parametrize(
    ("vram_bytes", "unloads"),
    [
        (0, True),  # on the CPU: a and b hold their 4 GB each in the 9 GB, c doesn't fit
        (None, True),  # no VRAM figure: the file size, as before
        (4 * GB, True),  # on a GPU: the VRAM it holds
        (GB, False),  # on a GPU, 1 GB each (partly offloaded): 4 GB c fits beside them
    ],
)
def test_a_loaded_models_footprint_is_its_size_when_it_runs_on_the_cpu(
    vram_bytes: int | None, unloads: bool
) -> None:
    views = [
        ollama_view(1, "a", Residency.LOADED, vram_bytes=vram_bytes),
        ollama_view(2, "b", Residency.LOADED, vram_bytes=vram_bytes),
        ollama_view(3, "c", Residency.COLD),
    ]
    assert evicts_loaded_of(views, {}) == {3: unloads}
