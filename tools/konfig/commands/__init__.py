"""One module per ``konfig`` subcommand, each exposing ``command``."""
