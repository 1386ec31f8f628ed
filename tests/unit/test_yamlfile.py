"""Hostile YAML is refused before it is built, naming the file, the document and the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from berth import yamlfile
from berth.bootstrap.load import LoadErrors, load
from berth.store import keys

APP = """api: kubernetes
kind: Application
metadata: {name: %s, namespace: default%s}
spec:
  manifest:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: x}%s}
"""

BOMB = "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [
    f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
    f"*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 9)])


@pytest.fixture(autouse=True)
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # files are named as given: relative here


def refused(tmp_path: Path, text: str, name: str = "hostile.yaml") -> str:
    (tmp_path / name).write_text(text)
    with pytest.raises(LoadErrors) as caught:
        load([name])
    return str(caught.value)


def test_an_alias_bomb_is_refused_at_the_alias_that_crosses_the_budget(tmp_path: Path) -> None:
    """Aliases count as what they expand to: 10 ** 9 values from a few hundred bytes
    are refused at the alias where the document passes 100,000, before anything is
    built (kubectl, too, accepts aliases and bounds their expansion)."""
    text = BOMB + "\n" + APP % ("bomb", "", ", data: {big: *a8}")
    said = refused(tmp_path, text)
    assert said.startswith("hostile.yaml#1 (line 5): more than 100,000 values in one "
                           "document (aliases expanded)")


def test_anchors_and_aliases_within_the_budget_load_as_kubectl_loads_them(
        tmp_path: Path) -> None:
    (tmp_path / "anchored.yaml").write_text(
        APP % ("l", ", labels: &labels {team: web}", ", data: *labels"))
    [doc] = load(["anchored.yaml"])
    assert doc.doc.metadata.labels == {"team": "web"}
    assert doc.doc.spec.manifest[0]["data"] == {"team": "web"}


def test_a_value_that_contains_itself_is_refused(tmp_path: Path) -> None:
    said = refused(tmp_path, "a: &loop [x, *loop]\n")
    assert said.startswith("hostile.yaml#1 (line 1): alias *loop inside &loop itself")


def test_nesting_counts_aliases_expanded(tmp_path: Path) -> None:
    deep = "d: &d " + "[" * 40 + "]" * 40 + "\ne: " + "[" * 30 + "*d" + "]" * 30 + "\n"
    said = refused(tmp_path, deep)
    assert "nested more than 64 levels deep (aliases expanded)" in said


def test_deep_nesting_is_refused_naming_the_line(tmp_path: Path) -> None:
    deep = "a: " + "[" * 500 + "]" * 500 + "\n"
    said = refused(tmp_path, APP % ("ok", "", "") + "---\n" + deep)
    assert said.startswith("hostile.yaml#2 (line 8): nested more than 64 levels deep")
    assert "RecursionError" not in said


def test_a_file_too_large_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    big = "# " + "x" * (yamlfile.MAX_FILE + 10) + "\n"
    assert refused(tmp_path, big) == ("hostile.yaml: larger than 256 MiB of text; split it "
                                      "into files")


def test_a_document_larger_than_etcd_takes_is_refused(tmp_path: Path) -> None:
    data = "".join(f"      k{i}: {'v' * 60}\n" for i in range(30_000))
    large = ("api: kubernetes\nkind: Application\nmetadata: {name: large}\nspec:\n"
             "  manifest:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: x}\n"
             "    data:\n")
    text = APP % ("small", "", "") + "---\n" + large + data
    said = refused(tmp_path, text)
    assert said.startswith("hostile.yaml#2: ")
    assert "bytes; a document may have at most 1,572,864 (etcd's request limit)" in said


def test_a_document_of_too_many_values_is_refused(tmp_path: Path) -> None:
    text = "\n".join(f"k{i}: 1" for i in range(yamlfile.MAX_NODES + 1))
    assert "more than 100,000 values in one document" in refused(tmp_path, text)


def test_duplicate_keys_name_both_lines(tmp_path: Path) -> None:
    text = ("api: kubernetes\nkind: Application\nmetadata:\n  name: shown-name\n"
            "  namespace: default\n  name: other-name\nspec: {}\n")
    said = refused(tmp_path, text)
    assert said == ("hostile.yaml#1 line 6: duplicate key 'name' (first at line 4)")


def test_a_name_ending_in_a_newline_is_refused(tmp_path: Path) -> None:
    said = refused(tmp_path, APP % ('"evil\\n"', "", ""))
    assert "metadata.name" in said or "invalid name 'evil\\n'" in said
    with pytest.raises(ValueError, match="invalid name"):
        keys.check_name("evil\n")
    with pytest.raises(ValueError, match="invalid namespace"):
        keys.check_namespace("default\n")


def test_good_input_still_loads(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(APP % ("web", ", labels: {app: web}", "") + "---\n"
                                        + APP % ("db", "", ""))
    assert [item.where for item in load(["good.yaml"])] == ["good.yaml#1", "good.yaml#2"]


def test_apiversion_gets_a_hint(tmp_path: Path) -> None:
    said = refused(tmp_path, (APP % ("web", "", "")).replace("api: kubernetes",
                                                              "apiVersion: kubernetes"))
    assert said.startswith("hostile.yaml#1 apiVersion: berth's documents say api:")
