"""What the pages promise, checked against the code: the README's and docs' commands and
examples, the configuration and status pages, the reference folder, and a suite that
passes on any date.
"""
