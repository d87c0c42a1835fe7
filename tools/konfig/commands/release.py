"""``konfig release``: hand a pull-delivery stack's objects to its controller."""

from __future__ import annotations

import click

from konfig.commands._common import connections, load_repository
from konfig.commands._console import echo_json, error, info
from konfig.commands._options import kube_options
from konfig.errors import EXIT_FINDINGS, EXIT_OK
from konfig.pipeline.selection import select_stacks


@click.command("release")
@click.argument("stacks", nargs=-1)
@kube_options
@click.option("--json", "as_json", is_flag=True, help="Print what was released as JSON.")
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    as_json: bool,
) -> int:
    """Hand STACKs' objects over between konfig and the pull controller.

    The direction is the stack's delivery (docs/pull.md, Hand-off); nothing is ever
    deleted from the cluster:

    \b
    pull: once the controller (Flux's kustomize-controller, Argo CD) holds every object
      of the stack's konfig inventory with its field manager, konfig drops its own
      part (the ApplySet label) from each and deletes the inventory.
    push: once konfig's inventory holds every object again (konfig apply with
      adoptUnmanaged), the controller's field managers drop their part (its owner
      labels), so that its prune skips the objects when the folder leaves the
      rendered branch. Run it before that publish.

    Until the other side holds every object nothing changes and exit 1 names the ones
    waiting. Without STACKs: every stack in pull delivery.

    \b
    Example:
      konfig release guestbook/prod
    """
    from konfig.engine.handoff import reclaim, release

    repo = load_repository(ctx)
    selected = select_stacks(repo, stacks, all_stacks=not stacks)
    if not stacks:
        selected = [s for s in selected if s.delivery.pull]
    results = []
    with connections(ctx, repo, kubeconfig, context) as conns:
        for stack in selected:
            verb = release if stack.delivery.pull else reclaim
            results.append(verb(conns.kube(stack), stack.path))
    for r in results:
        if r.waiting:
            more = f" (and {len(r.waiting) - 3} more)" if len(r.waiting) > 3 else ""
            error(
                f"{r.stack}: not handed over: {', '.join(r.waiting[:3])}{more} not held by "
                "the other side yet; nothing changed\n  hint: for a pull stack wait until "
                "the controller reconciled its folder; for a push stack apply it first "
                "(apply: {adoptUnmanaged: true}); then run again"
            )
        elif not r.had_inventory:
            info(f"{r.stack}: no inventory: nothing of it is konfig's")
        else:
            info(f"{r.stack}: handed over {len(r.released)} objects")
    if as_json:
        echo_json(
            [
                {
                    "path": r.stack,
                    "inventory": r.had_inventory,
                    "released": list(r.released),
                    "waiting": list(r.waiting),
                    "gone": list(r.gone),
                }
                for r in results
            ]
        )
    return EXIT_FINDINGS if any(r.waiting for r in results) else EXIT_OK
