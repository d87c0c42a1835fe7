"""``konfig matrix``: split a JSON list of stacks into shards for a CI job matrix.

The CI system is the distributed engine: many changed stacks spread over several
jobs, each given a JSON array of stacks. Two forms:

- ``--shards N`` (what the workflows use): exactly N shards, ``{"index", "stacks",
  "deleted"}`` each, for a *static* matrix ``shard: [0, ..., N-1]``. Both GitHub and
  Gitea run that; Gitea (1.26, 1.27) does not expand a matrix built from a job output.
  How many of them get stacks follows the number of stacks (konfig.yaml ``sharding``),
  and each stack's shard is a hash of its path (``konfig.pipeline.sharding``): stable
  between pushes. Every deleted stack is in shard 0. Printed with each shard's lists;
  the ``shards`` output (``--github-output``) holds only each shard's counts, so a job's
  outputs stay a few hundred bytes whatever the number of stacks (GitHub keeps 1 MB of a
  job's outputs): a matrix job sees in ``fromJSON(needs.<job>.outputs.shards)
  [matrix.shard]`` whether it has work, and takes its stacks with ``--shard I/N`` from
  the same change set (or from the printed file).
- ``--max-jobs N``: at most N non-empty chunks ``{"index", "stacks"}``, usable as a
  dynamic ``strategy.matrix.include`` on GitHub only.

Stacks stay JSON strings inside the objects, so paths with spaces or commas survive
the trip through a matrix or an expression untouched.
"""

from __future__ import annotations

import json
from typing import Any

import click

from konfig.commands._common import repository_root
from konfig.commands._console import echo_json, warn
from konfig.commands._options import stack_list
from konfig.commands._outputs import append_github_output, github_output_file
from konfig.errors import EXIT_OK, KonfigError, UsageError
from konfig.pipeline.sharding import MAX_SHARDS, ShardPolicy, assign, parse_slot, shard_count


def chunks(stacks: list[str], max_jobs: int, *, keep_one: bool = False) -> list[dict[str, Any]]:
    """Contiguous, balanced chunks of the sorted stacks (one project stays together
    as far as possible, which shares compile caches). ``keep_one``: one empty chunk
    when there are no stacks (e.g. only deleted stacks to preview)."""
    ordered = sorted(dict.fromkeys(stacks))
    if not ordered:
        return [{"index": 0, "stacks": "[]"}] if keep_one else []
    count = min(max_jobs, len(ordered))
    size, extra = divmod(len(ordered), count)
    out: list[dict[str, Any]] = []
    start = 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        out.append({"index": index, "stacks": json.dumps(ordered[start:end])})
        start = end
    return out


def shards(
    stacks: list[str], deleted: list[str], slots: int, policy: ShardPolicy
) -> list[dict[str, Any]]:
    """Exactly ``slots`` shards: the stacks spread over as many as ``policy`` asks for
    (:mod:`konfig.pipeline.sharding`), the others empty; the deleted stacks all go to
    shard 0, which previews them."""
    unique = list(dict.fromkeys(stacks))
    parts = assign(unique, shard_count(len(unique), slots, policy))
    gone = json.dumps(sorted(dict.fromkeys(deleted)))
    return [
        {
            "index": index,
            "stacks": json.dumps(parts[index]) if index < len(parts) else "[]",
            "deleted": gone if index == 0 else "[]",
        }
        for index in range(slots)
    ]


def shard_sizes(parts: list[dict[str, Any]]) -> list[dict[str, int]]:
    """Each shard's index and how many stacks and deleted stacks it holds: the ``shards``
    output, which must not grow with the stacks."""
    return [
        {
            "index": part["index"],
            "stacks": len(json.loads(part["stacks"])),
            "deleted": len(json.loads(part["deleted"])),
        }
        for part in parts
    ]


def _policy(ctx: click.Context) -> ShardPolicy:
    """konfig.yaml's ``sharding`` of the repository here; the defaults outside one."""
    from konfig.repo.settings import load_repo_config

    try:
        root = repository_root(ctx)
    except KonfigError:
        return ShardPolicy()
    config = load_repo_config(root)
    return ShardPolicy(config.stacks_per_shard, config.max_shards)


def _parse_shard(text: str) -> tuple[int, int]:
    try:
        slot = parse_slot(text, ShardPolicy())
    except ValueError as exc:
        raise UsageError(f"--shard {exc}") from None
    return slot.index, slot.slots


@click.command("matrix")
@click.option(
    "--stacks",
    "stacks_json",
    required=True,
    help="JSON array of stack paths, or @FILE holding one (for more than an argument holds).",
)
@click.option(
    "--deleted",
    "deleted_json",
    default="[]",
    show_default=True,
    help="JSON array of deleted stacks (or @FILE): in shard 0 (with --max-jobs and no "
    "stacks, one empty chunk is kept for them).",
)
@click.option(
    "--shards",
    "slots",
    type=click.IntRange(min=1, max=MAX_SHARDS),
    default=None,
    help="Exactly this many shards, for a static matrix of that length (GitHub and Gitea); "
    "as many of them get stacks as konfig.yaml's `sharding` asks for.",
)
@click.option(
    "--shard",
    "one_shard",
    default=None,
    metavar="I/N",
    help="Print only shard I of N (0-based), e.g. 0/8.",
)
@click.option(
    "--max-jobs",
    type=click.IntRange(min=1, max=256),
    default=None,
    help="At most this many non-empty chunks, for a dynamic matrix (GitHub only) "
    "[default: 16 when neither --shards nor --shard is given].",
)
@click.option(
    "--github-output",
    is_flag=True,
    help="Append `shards` (or, with --max-jobs, `matrix`) and `count` to $GITHUB_OUTPUT "
    "(with --shards: `shards` holds each shard's counts only, {index, stacks, deleted}, "
    "and `used` says how many shards have work).",
)
@click.pass_context
def command(
    ctx: click.Context,
    stacks_json: str,
    deleted_json: str,
    slots: int | None,
    one_shard: str | None,
    max_jobs: int | None,
    github_output: bool,
) -> int:
    """Split the stacks of --stacks into shards (or chunks) for a CI job matrix.

    \b
    Example:
      konfig matrix --stacks '["appops/a/dev", "appops/b/dev"]' --shards 8
      konfig matrix --stacks "$STACKS" --shard 1/8
    """
    if sum(x is not None for x in (slots, one_shard, max_jobs)) > 1:
        raise UsageError("give one of --shards, --shard and --max-jobs")
    stacks = stack_list("--stacks", stacks_json)
    deleted = stack_list("--deleted", deleted_json)
    outputs: dict[str, str]
    result: Any
    if one_shard is not None:
        index, count = _parse_shard(one_shard)
        result = shards(stacks, deleted, count, _policy(ctx))[index]
        outputs = {"shard": json.dumps(result)}
    elif slots is not None:
        policy = _policy(ctx)
        unique = len(dict.fromkeys(stacks))
        if shard_count(unique, MAX_SHARDS, policy) > slots:
            warn(
                f"konfig.yaml sharding.maxShards is {policy.max_shards}, but the workflow's "
                f"matrix has {slots} jobs: {unique} stacks go to {slots} shards. To spread "
                f"wider, raise the `shards` input and both matrix lists with it "
                f"(docs/forges.md, 'The fan-out')"
            )
        result = shards(stacks, deleted, slots, policy)
        sizes = shard_sizes(result)
        used = sum(1 for s in sizes if s["stacks"] or s["deleted"])
        outputs = {"shards": json.dumps(sizes), "count": str(len(result)), "used": str(used)}
    else:
        result = chunks(stacks, max_jobs or 16, keep_one=bool(deleted))
        outputs = {"matrix": json.dumps(result), "count": str(len(result))}
    if github_output:
        append_github_output(github_output_file(), outputs)
    echo_json(result)
    return EXIT_OK
