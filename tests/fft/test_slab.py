"""``SlabFFT`` (the slab plan's 2-D transforms fused with the pack) against numpy.fft."""

from __future__ import annotations

import numpy as np

from parvox.testing import mpi_test


@mpi_test(ranks=(1, 2, 3), timeout=120)  # 2: the direct exchange; 3: a middle rank, no planes
def test_slab_forward_and_backward_match_numpy_for_every_tile():
    from mpi4py import MPI

    from parvox.fft.slab import SlabFFT

    comm = MPI.COMM_WORLD
    rng = np.random.default_rng(5)
    # uneven cuts; (2, 7, 5): the third rank holds no planes
    for shape, real, single in (((7, 6, 5), False, False), ((9, 5, 8), True, False),
                                ((2, 7, 5), True, True), ((5, 3, 4), False, True)):
        x = rng.standard_normal(shape)
        if not real:
            x = x + 1j * rng.standard_normal(shape)
        x = x.astype({(True, False): np.float64, (True, True): np.float32,
                      (False, False): np.complex128, (False, True): np.complex64}[real, single])
        cdt = np.complex64 if single else np.complex128
        s = SlabFFT(comm, shape, real, cdt)
        (r0, r1), (c0, c1) = s.rows[s.index], s.cols[s.index]
        want = (np.fft.rfftn if real else np.fft.fftn)(x.astype(np.float64 if real else complex))
        tol = 2e-5 if single else 1e-12
        for tile, pipelined, norm in ((1, True, "backward"), (2, True, "ortho"),
                                      (s.planes, True, "forward"), (3, False, "backward")):
            scale = {"backward": 1, "ortho": np.sqrt(x.size), "forward": x.size}[norm]
            out = np.full(s.output_local, np.nan, cdt)
            s.forward(x[r0:r1], out, norm, pipelined=pipelined, tile=tile, window=2)
            ref = want[:, c0:c1] / scale
            assert np.linalg.norm(out - ref) <= tol * max(np.linalg.norm(ref), 1e-300), (
                shape, tile, pipelined)
            back = np.full(s.input_local, np.nan, x.dtype)
            kept = out.copy()
            s.backward(out, back, norm, pipelined=pipelined, tile=tile, window=2)
            np.testing.assert_array_equal(out, kept)  # the input is left alone
            assert np.allclose(back, x[r0:r1], atol=10 * tol), (shape, tile, pipelined)
