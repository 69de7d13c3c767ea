#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Syntax check of reStructuredText files with docutils, failing on any warning (as the kernel's
`make htmldocs` would print one). Sphinx-only directives the kernel's Documentation uses
(toctree, kernel-doc) are accepted without being rendered.
Usage: rstcheck.py FILE... ; prints one line per file, exits 1 if any has a warning or error."""
import sys

from docutils.core import publish_doctree
from docutils.parsers.rst import Directive, directives
from docutils.utils import SystemMessage


class Ignored(Directive):
    """A Sphinx directive: its options and content are accepted, nothing is rendered."""
    has_content = True
    optional_arguments = 10
    final_argument_whitespace = True
    option_spec = {"maxdepth": directives.unchanged, "caption": directives.unchanged,
                   "numbered": directives.flag, "glob": directives.flag, "hidden": directives.flag}

    def run(self):
        return []


for name in ("toctree", "kernel-doc"):
    directives.register_directive(name, Ignored)

bad = 0
for path in sys.argv[1:]:
    try:
        with open(path, encoding="utf-8") as f:
            publish_doctree(f.read(), source_path=path,
                            settings_overrides={"halt_level": 2, "report_level": 2, "warning_stream": sys.stderr})
        print(f"ok: {path}")
    except SystemMessage as ex:
        bad += 1
        print(f"FAIL: {path}: {ex}")
sys.exit(1 if bad else 0)
