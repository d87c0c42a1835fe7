import os
import time
from pathlib import Path

import pytest

from konfig.repo import statmemo
from konfig.repo.statmemo import MISSING, StatMemo


def _settled(monkeypatch: pytest.MonkeyPatch) -> None:
    later = time.time_ns() + 10 * 10**9
    monkeypatch.setattr(statmemo, "settled_before", lambda: later)


def test_a_value_is_served_only_for_the_same_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _settled(monkeypatch)
    f = tmp_path / "a.yaml"
    f.write_text("name: a\n")
    memo = StatMemo(tmp_path / "memo.json", "seed")
    memo.put("a.yaml", f.stat(), {"name": "a"})
    memo.save()
    again = StatMemo(tmp_path / "memo.json", "seed")
    assert again.get("a.yaml", f.stat()) == {"name": "a"}
    # another seed (other code, other rules): nothing is served
    assert StatMemo(tmp_path / "memo.json", "other").get("a.yaml", f.stat()) is MISSING
    # a touch moves the times: read again
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 1))
    assert again.get("a.yaml", f.stat()) is MISSING


def test_fresh_files_and_values_json_cannot_keep_are_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "a.yaml"
    f.write_text("x\n")
    memo = StatMemo(tmp_path / "memo.json", "seed")
    memo.put("a.yaml", f.stat(), "x")  # written just now: may change within the tick
    assert memo.get("a.yaml", f.stat()) is MISSING
    _settled(monkeypatch)
    memo = StatMemo(tmp_path / "memo.json", "seed")
    for value in ({1: "int key"}, {"when": time.gmtime(0)}, ("a", "tuple")):
        memo.put("a.yaml", f.stat(), value)
        assert memo.get("a.yaml", f.stat()) is MISSING
    memo.put("a.yaml", f.stat(), {"k": [1, 2.5, None, True, "s"]})
    assert memo.get("a.yaml", f.stat()) == {"k": [1, 2.5, None, True, "s"]}


def test_a_corrupt_memo_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "memo.json").write_text('{"seed": "seed", "files": ')
    assert StatMemo(tmp_path / "memo.json", "seed").entries == {}
