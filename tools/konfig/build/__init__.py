"""From KCL to Specs: the kcl-lib module, the compiler and its cache, goldens, KCL unit tests and
JUnit output.
"""
