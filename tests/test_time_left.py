from analysis import progress
from analysis.progress import TimeLeft


def test_time_left_follows_the_pace_of_the_current_stage_after_its_first_step(monkeypatch):
    clock = iter([0.0, 8.0, 8.5, 15.0, 20.0, 20.0, 30.0, 31.0, 51.0, 52.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    left = TimeLeft()
    assert left("forward pass", 0, 32) == ""  # the stage starts
    assert left("forward pass", 1, 32) == ""  # its first step done (slow: 8 s): the clock starts
    assert left("forward pass", 2, 32) == ""  # within the first second: no pace yet
    assert left("forward pass", 8, 32) == ", about 24 s left"  # 7 batches in 7 s, 24 to go
    assert left("forward pass", 32, 32) == ""  # done
    assert left("PGA by layer", 0, 31) == ""  # a new stage starts again
    assert left("PGA by layer", 1, 31) == ""
    assert left("PGA by layer", 2, 31) == ", about 29 s left"
    assert left("PGA by layer", 3, 31) == ", about 5 min left"  # 2 layers in 21 s, 28 to go
    assert left("PGA by layer", 1, 31) == ""  # a count that goes back starts again


def test_time_left_says_a_second_at_least():
    assert TimeLeft.describe(0.3) == ", about 1 s left" and TimeLeft.describe(24.4) == ", about 24 s left"
