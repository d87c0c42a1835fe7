[package
name = "konfig"
