"""KCL schema generator: Kubernetes OpenAPI definitions and CRDs rendered to KCL schemas.

``openapi`` turns JSON-schema definitions (kubernetes-validate's bundled ones, or any
OpenAPI ``definitions``) into :class:`~konfig.gen.model.SchemaDef` records; ``crd`` does
the same for ``CustomResourceDefinition`` YAML; ``render`` turns records into KCL files
with jinja2 templates; :func:`generate` composes them and :func:`compare` tells which
committed files are stale. Everything here is pure: files come in as data and go out as
``{relative path: text}``; the CLI reads and writes them.
"""

from konfig.gen.model import GeneratedFiles, SchemaDef
from konfig.gen.run import DEFAULT_GROUPS, Staleness, compare, generate

__all__ = ["DEFAULT_GROUPS", "GeneratedFiles", "SchemaDef", "Staleness", "compare", "generate"]
