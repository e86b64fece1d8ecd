"""The exposed top set: pins expose what must be named whatever it compiled, bounded and timed."""

from __future__ import annotations

from exporter.daemon.receiver.ranking import LINGER, MAX_PINNED, PIN_SECONDS, Ranking


def test_a_pinned_key_is_shown_beside_a_full_top_set_and_keeps_its_own_score() -> None:
    ranking = Ranking(size=2)
    for key in ("a", "b"):
        assert ranking.credit(key, 10.0, 0.0)
    assert not ranking.credit("refused", 0.0, 0.0)  # nothing compiled: not promoted
    assert ranking.pin("refused", 0.0) and ranking.credit("refused", 0.0, 1.0)  # later increments too
    assert ranking.shown() == {"a", "b", "refused"} and ranking.exposed == {"a", "b"}
    assert ranking.score("refused", 1.0) == 0.0  # its recent compile seconds stay the truth


def test_pins_are_bounded_then_linger_and_expire() -> None:
    ranking = Ranking(size=1)
    for i in range(MAX_PINNED + 3):
        ranking.pin(f"k{i}", float(i))
    assert len(ranking.pinned) == MAX_PINNED
    assert {"k0", "k1", "k2"} <= set(ranking.lingering)  # the oldest made room, their final values on show
    assert ranking.end_lingering(MAX_PINNED + 3 + LINGER) >= {"k0", "k1", "k2"}
    ranking.pin("k10", 100.0)  # renewed
    later = 100.0 + PIN_SECONDS + 1
    assert ranking.end_lingering(later) == set()  # unpinned now, lingering first
    assert "k10" not in ranking.pinned and "k10" in ranking.lingering
    assert "k10" in ranking.end_lingering(later + LINGER + 1)
    assert not ranking.pinned


def test_a_pinned_key_outlives_its_linger() -> None:
    ranking = Ranking(size=1)
    ranking.credit("a", 1.0, 0.0)
    ranking.credit("b", 10.0, 0.0)  # beats a: a is demoted and lingers
    assert "a" in ranking.lingering
    ranking.pin("a", 1.0)
    assert ranking.end_lingering(LINGER + 5) == set() and "a" in ranking.shown()
