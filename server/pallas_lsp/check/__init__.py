"""Checking a project on disk, as the command line does: files -> findings
(checker.py: discovery, exclusion, decoding, one project), the configuration
([tool.pallas-lsp], config.py) and its globs (globs.py), the codes it can
print and their selectors (codes.py), --fix / --diff (fixes.py) and the
coverage report (coverage_report.py)."""
