from fixtures.sops import sops_cli

__all__ = ["sops_cli"]
