from analysis import progress
from analysis.progress import TimeLeft


def test_time_left_follows_the_pace_of_the_current_stage(monkeypatch):
    clock = iter([0.0, 0.5, 10.0, 20.0, 20.0, 21.0, 41.0, 42.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    left = TimeLeft()
    assert left("forward pass", 0, 32) == ""  # the clock starts
    assert left("forward pass", 1, 32) == ""  # within the first second: no pace yet
    assert left("forward pass", 8, 32) == ", about 30 s left"  # 8 batches in 10 s, 24 to go
    assert left("forward pass", 32, 32) == ""  # done
    assert left("PGA by layer", 0, 31) == ""  # a new stage starts the clock again
    assert left("PGA by layer", 1, 31) == ", about 30 s left"
    assert left("PGA by layer", 2, 31) == ", about 5 min left"  # 2 layers in 21 s, 29 to go
    assert left("PGA by layer", 1, 31) == ""  # a count that goes back starts again
