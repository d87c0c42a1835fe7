# The providers OpenTofu may install for this repository's stacks, and the hashes of
# the packages it trusts (konfig runs `tofu init -lockfile=readonly`: any other package
# is refused). Change it only with `tofu providers lock` (docs/terraform.md, "The lock
# file") and review it like code.
#
# The hash below is the package hack/tofu builds from the pinned source (its mirror:
# this repository's own CI has no registry). A repository that installs from the
# registry records the registry's hashes instead (docs/terraform.md).

provider "registry.opentofu.org/cyrilgdn/postgresql" {
  version     = "1.26.0"
  constraints = "1.26.0"
  hashes = [
    "h1:vmGc/BE4B1Z/Pg5mE/quHNZG4qgfZVvX7KAJdl+bdUk=",
  ]
}
