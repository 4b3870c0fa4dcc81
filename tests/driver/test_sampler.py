"""A trial's per-second samples are spilled to Parquet parts, so an hours-long trial holds a bounded number."""

from substrate_assets.driver.samples import Sampler


def state(number: int) -> dict[str, object]:
    return {"workers": {"idle": number % 4, "partial": 1, "at_capacity": None}, "running_actors": number,
            "parked": number % 5}


def test_samples_spill_and_the_frame_holds_every_row_in_order(tmp_path):
    sampler = Sampler(spill_dir=tmp_path / "samples", spill_every=60)
    for number in range(250):
        sampler.take(state(number), users=None if number < 3 else 4)
        assert len(sampler.rows) < 60
    assert len(sampler.parts) == 4 and len(sampler.rows) == 10
    frame = sampler.frame()
    assert frame.height == 250
    assert frame["running_actors"].to_list() == list(range(250))
    assert frame["users"].to_list()[:4] == [None, None, None, 4]  # not yet known stays null
    assert frame["at_capacity_workers"].null_count() == 250


def test_without_a_directory_every_row_stays(tmp_path):
    sampler = Sampler(spill_every=5)
    for number in range(12):
        sampler.take(state(number), users=2)
    assert len(sampler.rows) == 12 and sampler.frame().height == 12
