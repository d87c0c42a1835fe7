"""konfig.words: plurals and a message named after its stack once."""

from __future__ import annotations

from konfig.words import about, plural


def test_plural() -> None:
    assert plural(1, "object") == "1 object"
    assert plural(2, "inventory", "inventories") == "2 inventories"
    assert plural(0, "stack") == "0 stacks"
    assert plural(3, "policy") == "3 policies"


def test_a_message_names_its_stack_once() -> None:
    stack = "appops/webshop/prod"
    # the OpenTofu runtime's messages already start with the stack
    assert about(stack, f"{stack}: tofu init failed") == f"{stack}: tofu init failed"
    assert about(stack, "tofu init failed") == f"{stack}: tofu init failed"
    # another stack's name at the start is not taken for this one
    assert about(stack, "appops/webshop/dev: x") == f"{stack}: appops/webshop/dev: x"
    assert about(stack, f"{stack}x: y") == f"{stack}: {stack}x: y"
