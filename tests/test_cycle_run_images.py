"""``vtasim.sim.cycle.run_images``: several images in threads give, in order, what ``run_image`` gives for each."""

import pytest

from vtasim.hw.config import load_config, load_preset
from vtasim.sim.cycle import run_image, run_images
from vtasim.sim.errors import SimError
from vtasim.sim.programs.randprog import generate
from engine_checks import same_run


@pytest.mark.parametrize("workers", [None, 1, 2, 3])
def test_threads_give_each_image_its_own_run(workers):
    images = [generate(load_preset(p), 900 + k) for k, p in enumerate(["1x16x16", "2x16x16", "1x8x8", "1x16x16"])]
    results = run_images(images, workers=workers)
    assert len(results) == len(images)
    for img, res in zip(images, results):
        same_run(img, run_image(img), res, timing=True)


def test_an_error_is_raised_for_its_image():
    from vtasim.hw.config import MEM_UOP
    from vtasim.sim.builder import ProgramBuilder
    from vtasim.sim.errors import ProgramError
    cfg = load_config()
    b = ProgramBuilder(cfg)
    u = b.uops([(cfg.acc_depth - 2, 0, 0)])
    b.load(memory_type=MEM_UOP, dram_base=u, x_size=1)
    b.gemm(uop_bgn=0, uop_end=1, iter_in=3, dst_factor_in=1)   # dst reaches depth - 2 + 2 = depth
    b.finish()
    with pytest.raises(ProgramError, match="dst_idx"):
        run_images([generate(cfg, 5), b.build()], workers=2)


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_bad_worker_count(workers):
    with pytest.raises(SimError, match="workers = .* must be a positive integer"):
        run_images([generate(load_config(), 1)], workers=workers)
