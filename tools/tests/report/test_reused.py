"""The comment of a live preview that re-used stacks says how many and from which
commit, and names its run (hidden) for the next push's preview."""

from __future__ import annotations

from report.test_pull_request import RUN, SHA, change, changed, preview, stack

from konfig.pipeline.reusing import previous_run, run_line
from konfig.report import comment, pull_request

PREV = "9" * 40
OLDER = "8" * 40


def test_the_comment_says_how_many_stacks_were_reused_from_which_commit() -> None:
    paths = [f"appops/shop/s{i}" for i in range(4)]
    stacks = [
        stack(p, [change("shop", "ConfigMap", f"c{i}", "update")]) for i, p in enumerate(paths)
    ]
    stacks[1]["reusedFrom"] = PREV
    stacks[2]["reusedFrom"] = PREV
    stacks[3]["reusedFrom"] = OLDER
    inputs = pull_request.Inputs(previews=[preview(*stacks)], changed=changed(*paths))
    report = pull_request.build(inputs, sha=SHA, run_url=RUN, run_id="4242")
    assert report.reused == ((OLDER, 1), (PREV, 2))
    for layout in ("stacks", "grouped"):
        text = comment.render(report, layout=layout).text  # type: ignore[arg-type]
        assert (
            f"♻️ 1 stack re-used from `{OLDER[:12]}`, 2 stacks re-used from `{PREV[:12]}` "
            "(Spec and live objects unchanged since that commit's preview)"
        ) in text, text
        assert previous_run(text) == "4242"

    # nothing re-used: no line; the run is still named for the next push
    fresh = pull_request.build(
        pull_request.Inputs(previews=[preview(stack(paths[0], []))], changed=changed(paths[0])),
        sha=SHA,
        run_url=RUN,
        run_id="43",
    )
    text = comment.render(fresh).text
    assert "re-used" not in text and previous_run(text) == "43"


def test_no_run_is_named_without_a_live_preview() -> None:
    # compile/test/check only (a fork's comment, or the placeholder's successor)
    report = pull_request.build(
        pull_request.Inputs(changed=changed("appops/shop/a")), sha=SHA, run_url=RUN, run_id="7"
    )
    assert report.run_id is None and previous_run(comment.render(report).text) is None


def test_the_run_line_is_read_back_strictly() -> None:
    assert previous_run(f"text\n{run_line('123')}\nmore") == "123"
    assert previous_run("<!-- konfig:preview-run v1 12a -->") is None
    assert previous_run(f"{run_line('1')}\n{run_line('2')}") is None  # two: neither
    assert previous_run(f"quoted: {run_line('5')}") is None  # a whole line only


def test_a_comment_without_a_live_preview_keeps_naming_the_last_live_run() -> None:
    """The offline first comment of a multi-shard push replaces the live comment of the
    push before, while the run works; preview-cluster.yml reads the run to re-use from
    the comment after that (konfig pr --previous-run): the run stays named until a live
    preview names its own."""
    from konfig.pipeline.reusing import keep_previous_run

    live = f"## Konfig preview\n\nlive\n{run_line('41')}\n"
    offline = "## Konfig preview\n\nrender diff of base vs merge\n"
    kept = keep_previous_run(live, offline)
    assert kept.startswith(offline.rstrip("\n")) and previous_run(kept) == "41"
    newer = f"## Konfig preview\n\nlive again\n{run_line('52')}\n"
    assert keep_previous_run(kept, newer) == newer  # its own run, as it is
    assert keep_previous_run(None, offline) == offline  # a first comment names none
    assert keep_previous_run(offline, offline) == offline
