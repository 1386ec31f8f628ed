"""A list in a reason names a few items and counts the rest."""

from berth.store.documents.reasons import listed


def test_a_list_names_the_first_five_and_counts_the_rest() -> None:
    assert listed([]) == ""
    assert listed(["a", "b"]) == "a, b"
    assert listed(f"n{i}" for i in range(5)) == "n0, n1, n2, n3, n4"
    assert listed((f"n{i}" for i in range(80)), "; ") == "n0; n1; n2; n3; n4 and 75 more"
    assert listed(["a", "b", "c"], named=1) == "a and 2 more"
