"""A reviewed record too long for the comment (docs/review.md, "A record too long for the
comment"): the comment carries a reference (the record's sha256, size, run and artifact)
and the record is read back only when its bytes are exactly those.

At 1,000 stacks the record was about 130,000 characters in these tests (320,706 in the
forge bench's comment, over the forges' 65,536): the report job failed and the offline
comment was never replaced."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fleet import Fleet, set_image

from konfig.errors import UsageError
from konfig.pipeline.reviewed import (
    ARTIFACT,
    INLINE_MAX,
    Reference,
    find_hidden,
    find_reference,
    hidden,
    read_referenced,
    read_reviewed,
    record_bytes,
)
from konfig.report import comment, pull_request
from konfig.report.budget import COMMENT_LIMIT, DEFAULT_BUDGET
from konfig.report.records import Report
from konfig.report.reviewed import carried_body

SHA = "0123456789abcdef0123456789abcdef01234567"
RUN = "4242"


def report(projects: int, envs: tuple[str, ...] = ("dev", "staging", "prod", "qa")) -> Report:
    fleet = Fleet(projects, envs=envs, edits=[set_image("nginx:1.27.4")], reviews=True)
    inputs = pull_request.Inputs(previews=[fleet.preview()], changed=fleet.changed())
    return pull_request.build(
        inputs, sha=SHA, run_url=f"https://forge.example/runs/{RUN}", pr=7, run_id=RUN
    )


@pytest.fixture(scope="module")
def thousand() -> Report:
    return report(250)


def test_a_1000_stack_comment_stays_under_the_budget_with_the_record_out_of_it(
    thousand: Report,
) -> None:
    assert len(thousand.reviewed.stacks) == 1000
    assert len(hidden(thousand.reviewed)) > COMMENT_LIMIT  # the record itself: 130,084
    shown = comment.render(thousand)
    assert len(shown.text) <= DEFAULT_BUDGET < COMMENT_LIMIT, len(shown.text)
    assert not shown.truncated and "Shortened" not in shown.text
    assert "1,000 stacks" in shown.text
    assert not find_hidden(shown.text)  # no record in it, only where it is
    ref = find_reference(shown.text)
    data = record_bytes(thousand.reviewed)
    assert ref == Reference(int(RUN), hashlib.sha256(data).hexdigest(), len(data), ARTIFACT)
    # the full report (job summary, artifact) names the same bytes
    full = comment.render_full(thousand, budget=900_000)
    assert find_reference(full.text) == ref


def test_marker_record_verified_round_trip(thousand: Report) -> None:
    shown = comment.render(thousand)
    ref = find_reference(shown.text)
    assert ref is not None
    back = read_referenced(ref, record_bytes(thousand.reviewed), where="the artifact")
    assert back.digests() == thousand.reviewed.digests()
    assert (back.head, back.pr) == (thousand.reviewed.head, 7)
    assert back.stacks == thousand.reviewed.stacks  # live versions, fields: all of it


def test_a_record_that_fits_stays_in_the_comment() -> None:
    small = report(1, envs=("dev", "prod"))
    text = comment.render(small).text
    assert len(hidden(small.reviewed)) <= INLINE_MAX
    assert find_reference(text) is None and find_hidden(text)
    assert read_reviewed(text, where="c").digests() == small.reviewed.digests()


def test_other_bytes_are_not_the_reviewed_record(thousand: Report) -> None:
    ref = find_reference(comment.render(thousand).text)
    assert ref is not None
    data = record_bytes(thousand.reviewed)
    # one stack's digest changed, same length: the sha256 differs
    digest = next(iter(thousand.reviewed.stacks.values())).digest
    other = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    tampered = data.replace(digest.encode(), other.encode(), 1)
    assert len(tampered) == len(data) and tampered != data
    with pytest.raises(UsageError, match=r"has sha256 .*not the reviewed record"):
        read_referenced(ref, tampered, where="the artifact")
    # a stack dropped: the size differs
    doc = json.loads(data)
    doc["stacks"].pop(next(iter(doc["stacks"])))
    shorter = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    with pytest.raises(UsageError, match=r"bytes, the comment names .*not the reviewed record"):
        read_referenced(ref, shorter, where="the artifact")
    # a record whose bytes are named but does not hold together is still refused
    bad = data.replace(digest.encode(), other.encode())
    forged = Reference(ref.run, hashlib.sha256(bad).hexdigest(), len(bad))
    with pytest.raises(UsageError, match="altered"):
        read_referenced(forged, bad, where="the artifact")


def test_a_comment_with_a_reference_is_written_as_it_is(thousand: Report) -> None:
    """`konfig comment` carries earlier heads into a record in the comment; a body with
    a reference has none to carry into, and an earlier record must not be appended after
    it (it would become the comment's last record)."""
    small = report(1, envs=("dev", "prod"))
    previous = comment.render(small).text
    body = comment.render(thousand).text
    out = carried_body(previous, body)
    assert out.text == body and out.carried is None
    assert find_reference(out.text) is not None and not find_hidden(out.text)


def test_a_record_after_the_reference_is_the_last_one(thousand: Report) -> None:
    body = comment.render(thousand).text
    small = report(1, envs=("dev", "prod"))
    assert find_reference(body + "\n" + hidden(small.reviewed) + "\n") is None


def test_a_comment_with_only_a_reference_says_where_the_record_is(thousand: Report) -> None:
    body = comment.render(thousand).text
    with pytest.raises(UsageError, match=f"artifact {ARTIFACT} of run {RUN}"):
        read_reviewed(body, where="pull request #7's comment")


def test_without_a_run_the_record_stays_in_the_comment(thousand: Report) -> None:
    """`konfig report` outside a workflow (no --run-id) has no run to hold the record."""
    from dataclasses import replace

    local = replace(thousand, run_id=None)
    text = comment.render(local, budget=10**7).text
    assert find_reference(text) is None and find_hidden(text)
