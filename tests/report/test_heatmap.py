"""Memory-access heatmaps (tritonkit.report.charts.heatmap): the display grid of 1-D and 2-D access
maps, out-of-bounds cells on the extended canvas, downsampling, legends and colours. CPU only."""
import numpy as np
import pytest

from tritonkit.report.charts import heatmap as hm
from tritonkit.report.charts._figure import hex_to_rgb

OOB_RGB = hex_to_rgb(hm.OOB_COLOR)


# ------------------------------------------------------------------------------------------ heatmaps

def _has_color(img, rgb):
    return bool((img[..., :3] == np.array(rgb, dtype=np.uint8)).all(axis=-1).any())


def test_heatmap_1d_wraps_into_a_square_and_marks_oob_cells(vector_add_map):
    data = hm.heatmap_data(vector_add_map())
    assert data.layout == "1d" and data.grid_shape == (32, 32) and data.wrap_width == 32
    assert data.first == (0, 0) and not data.downsampled
    # elements 1000..1023 are out of bounds: row 31, columns 8..31 of the wrapped grid
    oob = np.argwhere(data.oob_reads > 0)
    assert oob.tolist() == [[31, c] for c in range(8, 32)]
    assert int(data.oob_reads.sum()) == 24 and not data.oob_writes.any()
    assert not data.inside[31, 8:].any() and data.inside[31, :8].all()
    assert data.read_program[0, 0] == 0 and data.read_program[31, 7] == 3  # element 999: program 3
    assert data.reads_total == 1000 and data.oob_lanes == 24
    assert _has_color(hm.heatmap_rgba(data, "reads"), OOB_RGB)
    assert not _has_color(hm.heatmap_rgba(data, "reads")[:31 * 7], OOB_RGB)  # only the last row is red
    assert "out of bounds" in [e.label for e in data.legend]
    assert "wrapped row-major into 32 x 32 cells" in data.caption and "elements 1,000..1,023" in data.caption


def test_heatmap_without_oob_uses_no_oob_colour(vector_add_map):
    data = hm.heatmap_data(vector_add_map(oob=False, access="store"))
    assert not data.has_oob and data.oob_lanes == 0
    assert data.panels() == ["writes"]  # one lane per element: the density panel would repeat it
    for panel in hm.PANELS:
        assert not _has_color(hm.heatmap_rgba(data, panel), OOB_RGB)
    assert "out of bounds" not in [e.label for e in data.legend]
    assert "no out-of-bounds lanes" in data.caption
    # 1000 elements wrap into 32 x 32 cells: the 24 cells after the end are transparent padding
    assert int(data.pad.sum()) == 24 and (hm.heatmap_rgba(data, "writes", scale=1)[..., 3] == 0).sum() == 24


def test_heatmap_2d_extends_the_canvas_to_the_oob_coordinates(access_map, tile):
    m = access_map("a", [6, 5], "float32",
                   [(0, "load", tile(0, 3, 0, 5)), (1, "load", tile(3, 3, 0, 5)),
                    (1, "store", np.array([[6, 2]] * 3)), (0, "load", np.array([[2, -1]]))], programs=2)
    data = hm.heatmap_data(m)
    assert data.layout == "2d" and data.grid_shape == (7, 6) and data.first == (0, -1)
    assert data.oob_writes[6, 3] == 3 and int(data.oob_writes.sum()) == 3
    assert data.oob_reads[2, 0] == 1 and int(data.oob_reads.sum()) == 1
    assert data.inside[:6, 1:].all() and not data.inside[6].any() and not data.inside[:, 0].any()
    assert data.read_program[0, 1] == 0 and data.read_program[5, 5] == 1
    reads, writes = hm.heatmap_rgba(data, "reads", scale=1), hm.heatmap_rgba(data, "writes", scale=1)
    assert tuple(reads[2, 0, :3]) == OOB_RGB and tuple(writes[6, 3, :3]) == OOB_RGB
    assert tuple(reads[6, 3, :3]) != OOB_RGB  # a store out of bounds is not a read
    assert tuple(reads[1, 2, :3]) == hex_to_rgb(hm.PROGRAM_PALETTE[0])  # inner cells: the program's colour
    assert tuple(reads[4, 4, :3]) == hex_to_rgb(hm.PROGRAM_PALETTE[1])
    assert tuple(reads[0, 1, :3]) == hex_to_rgb(hm.EDGE_COLOR)  # the tensor's outline next to the extension
    assert "rows 2..6, columns -1..2" in data.caption
    # small cells: a red halo around the out-of-bounds cell, on the extended canvas only
    big = hm.heatmap_rgba(data, "writes", scale=3)
    assert tuple(big[6 * 3 + 1, 2 * 3 + 2, :3]) == OOB_RGB  # the cell left of it, outside the tensor
    assert tuple(big[5 * 3 + 1, 3 * 3 + 1, :3]) != OOB_RGB  # the tensor cell above it keeps its colour


def test_heatmap_downsampled_keeps_totals_and_says_so(access_map, tile):
    rows, cols = 1000, 600
    acc = [(p, "load", tile(p * 100, 100, 0, cols)) for p in range(10)]
    m = access_map("big", [rows, cols], "bfloat16", acc, bins=(4, 4), programs=10)
    data = hm.heatmap_data(m, max_side=64)
    h, w = data.grid_shape
    assert h <= 64 and w <= 64
    assert (data.cell_rows, data.cell_cols) == (16, 12)  # 4 x 4 bins merged 4 x 3 times
    assert int(data.elements.sum()) == rows * cols and data.reads_total == rows * cols
    assert int(data.reads.sum()) == rows * cols
    assert data.downsampled and "16 x 12 elements (downsampled)" in data.caption
    assert data.read_program.max() == 9 and data.read_program.min() == 0


def test_heatmap_far_oob_is_drawn_at_the_edge_and_counted(vector_add_map):
    m = vector_add_map(n=100, block=100, oob=False)
    m["oob"] = [[0, -(10 ** 9), "load", 5], [0, 100, "store", 2]]
    m["oob_lanes"] = 7
    data = hm.heatmap_data(m)
    assert data.oob_clipped == 5 and data.oob_drawn == 7
    assert int(data.oob_reads.sum()) == 5 and int(data.oob_writes.sum()) == 2
    assert "drawn at the canvas' edge" in data.caption


def test_heatmap_many_programs_legend_cycles_the_palette_and_avoids_red(access_map, line):
    n = 64 * 100
    acc = [(p, "store", line(p * 64, 64)) for p in range(100)]
    data = hm.heatmap_data(access_map("o", [n], "float32", acc, programs=100))
    cycle = [e for e in data.legend if e.colors]
    assert len(cycle) == 1 and list(cycle[0].colors) == list(hm.PROGRAM_PALETTE)
    assert hm.OOB_COLOR not in hm.PROGRAM_PALETTE
    for c in hm.PROGRAM_PALETTE:  # no palette colour is near the OOB red
        assert sum(abs(a - b) for a, b in zip(hex_to_rgb(c), OOB_RGB)) > 120


def test_heatmap_rejects_a_malformed_map(vector_add_map):
    m = vector_add_map()
    m["writes"] = [[0] * 10]
    with pytest.raises(ValueError, match="writes"):
        hm.heatmap_data(m)
    with pytest.raises(ValueError):
        hm.heatmap_data({**m, "rows": 0})
    with pytest.raises(ValueError):
        hm.heatmap_rgba(hm.heatmap_data(vector_add_map()), "nope")
    png = hm.heatmap_png(hm.heatmap_data(vector_add_map()), "reads")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_density_colours_are_matplotlibs_blues_without_matplotlib():
    from matplotlib import colormaps

    from tritonkit.report.charts._figure import blues
    t = np.concatenate([np.linspace(0.0, 1.0, 20001), np.random.default_rng(0).random(5000), [-0.5, 1.5]])
    assert np.array_equal(blues(t), colormaps["Blues"](t)[..., :3])
    assert blues(0.5).shape == (3,) and blues(np.zeros((2, 3))).shape == (2, 3, 3)

