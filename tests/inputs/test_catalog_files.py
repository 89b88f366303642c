"""Hostile catalog files, one row per case: a data copy with one file broken, the error class
the catalog raises and a fragment of its one-line message (which names the file)."""

import pytest

from prfaas_plan.errors import ConfigError, ProfileError
from prfaas_plan.inputs.catalog import Catalog
from tests.cli.test_cli import data_copy

MODEL = "internal-1t-hybrid"
DECODE = f"profiles/{MODEL}/decode/h20-x8"
MLA = "{type: mla, count: 15, kv_lora_rank: 512, qk_rope_head_dim: 64}"


def replace(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize(
    "break_it, load, error, fragment",
    [
        (lambda d: replace(d / "gpus/h200.yaml", "dense_fp8_tflops: 1979", "dense_fp8_tflops: 500"),
         lambda c: c.gpu("h200"), ConfigError, "must lie between 1x and 2.5x dense_bf16_tflops"),
        (lambda d: replace(d / "gpus/h200.yaml", "name: h200", "name: h201"),
         lambda c: c.gpu("h200"), ConfigError, "name must match the file name 'h200'"),
        (lambda d: (d / "gpus/h200.yaml").write_text("- a\n- b\n"),
         lambda c: c.gpu("h200"), ConfigError, "expected a mapping of fields, found list"),
        (lambda d: replace(d / "gpus/h200.yaml", "hbm_capacity_gb: 141", "hbm_capacity_gb: -1\nsize: 1"),
         lambda c: c.gpu("h200"), ConfigError, "(and 1 more problem)"),
        (lambda d: replace(d.parent / "models.yaml", MLA, "{type: mla, count: 15, kv_lora_rank: 512}"),
         lambda c: c.models(), ConfigError, "a mla layer group needs qk_rope_head_dim > 0"),
        (lambda d: replace(d.parent / "models.yaml", "active_params: 3.0e9", "active_params: 3.0e12"),
         lambda c: c.models(), ConfigError, "active_params (3e+12) cannot exceed total_params"),
        (lambda d: replace(d.parent / "models.yaml",
                           'params: "github.com/MoonshotAI/Kimi-Linear README (48B total, 3B activated)"',
                           'params: ""'),
         lambda c: c.models(), ConfigError, "sources needs a non-empty entry for params"),
        (lambda d: (d / DECODE / "meta.yaml").unlink(),
         lambda c: c.decode_table(MODEL, "h20", 8), ProfileError, "profile metadata file not found"),
        (lambda d: replace(d / DECODE / "meta.yaml", "gpus_per_instance: 8", "gpus_per_instance: 4"),
         lambda c: c.decode_table(MODEL, "h20", 8), ProfileError,
         "gpus_per_instance must be 8 to match its directory, found 4"),
        (lambda d: (d / DECODE / "decode_step.csv").write_text("\n"),
         lambda c: c.decode_table(MODEL, "h20", 8), ProfileError, "empty file, expected header"),
        (lambda d: (d / DECODE / "decode_step.csv").write_text(
            "batch_size,decode_step_latency_s\n20,0.025,7\n"),
         lambda c: c.decode_table(MODEL, "h20", 8), ProfileError, "data row 1 has 3 cells, expected 2"),
        (lambda d: (d / DECODE / "decode_step.csv").write_text(
            "batch_size,decode_step_latency_s\n20.5,0.025\n"),
         lambda c: c.decode_table(MODEL, "h20", 8), ProfileError, "batch_size must be whole numbers"),
    ],
    ids=["fp8 slower than bf16", "gpu name", "gpu not a mapping", "two problems", "layer dims",
         "active > total", "empty source", "no metadata", "metadata mismatch", "empty csv",
         "ragged row", "fractional batch"],
)  # fmt: skip
def test_broken_catalog_file_fails_with_one_line(tmp_path, break_it, load, error, fragment):
    data = data_copy(tmp_path)
    break_it(data)
    with pytest.raises(error) as caught:
        load(Catalog.open(data))
    message = str(caught.value)
    assert fragment in message and "\n" not in message, message
    assert str(data.parent) in message  # it names the file


def test_a_data_dir_that_is_not_a_directory(tmp_path):
    with pytest.raises(ConfigError, match="is not a directory"):
        Catalog.open(tmp_path / "missing")


def test_a_catalog_reads_each_gpu_file_once_and_keeps_no_error(tmp_path):
    """A catalog's GPU (as its models) is read once; a new catalog reads the file again, and a
    refused file is refused at each ask, not remembered."""
    data = data_copy(tmp_path)
    catalog = Catalog.open(data)
    first = catalog.gpu("h200")
    replace(data / "gpus/h200.yaml", "hbm_capacity_gb: 141", "hbm_capacity_gb: 142")
    assert catalog.gpu("h200") is first and first.hbm_capacity_gb == 141
    assert Catalog.open(data).gpu("h200").hbm_capacity_gb == 142
    replace(data / "gpus/h200.yaml", "name: h200", "name: h201")
    broken = Catalog.open(data)
    for _ in range(2):
        with pytest.raises(ConfigError, match="name must match the file name 'h200'"):
            broken.gpu("h200")
