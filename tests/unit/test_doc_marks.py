"""Every shell command in the user docs is run by a test as written, or marked as needing what
this machine lacks (issue 33). This module is the fast half: it reads the docs and fails when a
command is neither; tests/integration/test_doc_commands.py runs them (SESSIONS there).

A doc edit drops in: a new command in a doc that has a session is run by it, in order, with no
change here. A new doc in DOCS needs a session; a block that cannot run here gets the mark
`<!-- needs: WHAT THIS MACHINE LACKS -->` on the line directly above its fence."""

from __future__ import annotations

import re

import pytest

from tests.doc_commands import DOCS, REPO, blocks
from tests.integration.test_doc_commands import ELSEWHERE, SESSIONS


def test_the_parser_reads_commands_as_a_reader_does() -> None:
    text = """
Intro.

```bash
kflab check                # a comment stays with its command
# a comment line is no command
python3 -m venv v && . v/bin/activate
for h in a b; do
  echo "$h"
done
kflab apply \\
  -f x.yaml
```

<!-- needs: a GPU -->
```bash
nvidia-smi
```

```console
$ kflab class plan --students 3
server: 64 CPUs
$ cat roster.csv
student
```

```python
print("not shell")
```
"""
    found = blocks("doc.md", text)
    assert [(b.line, b.lang, b.needs) for b in found] == [(4, "bash", None),
                                                          (16, "bash", "a GPU"),
                                                          (20, "console", None)]
    assert [(c.line, c.text) for c in found[0].commands] == [
        (5, "kflab check                # a comment stays with its command"),
        (7, "python3 -m venv v && . v/bin/activate"),
        (8, 'for h in a b; do\n  echo "$h"\ndone'),
        (11, "kflab apply \\\n  -f x.yaml")]
    assert [c.text for c in found[2].commands] == ["kflab class plan --students 3",
                                                   "cat roster.csv"]
    assert found[0].commands[0].key == "kflab check"  # sessions name it without its comment


def test_every_doc_has_a_session_and_every_mark_says_what_is_missing() -> None:
    assert sorted(SESSIONS) == sorted(DOCS)
    for doc in DOCS:
        for block in blocks(doc):
            if block.needs is not None:
                assert len(block.needs) >= 8, f"{doc}:{block.line}: say what is missing"
        keys = {c.key for b in blocks(doc) if b.needs is None for c in b.commands}
        session = SESSIONS[doc]
        for name in [*session.may_exit, *session.answers]:
            assert name in keys, f"{doc}'s session names {name!r}, which the doc no longer runs"


def test_commands_run_elsewhere_are_run_there_as_written() -> None:
    """A command that a test of its own runs (CI runs README command 2) is named with that
    test, which must contain the command verbatim; a stale entry fails."""
    in_docs = {c.key for doc in DOCS for b in blocks(doc) for c in b.commands}
    for command, where in ELSEWHERE.items():
        assert command in in_docs, f"ELSEWHERE names {command!r}, which no doc has any more"
        assert re.search(rf"(^|\s){re.escape(command)}(\s|$)", (REPO / where).read_text(),
                         re.M), f"{where} does not run {command!r} as written"


@pytest.mark.parametrize("doc", DOCS)
def test_no_command_is_neither_run_nor_marked(doc: str) -> None:
    """What the session test of DOC will run, and what it skips (marked): printed, so a report
    shows both. A doc without a session has its commands fail here."""
    marked = [(b.line, b.needs, len(b.commands)) for b in blocks(doc) if b.needs is not None]
    run = [c for b in blocks(doc) if b.needs is None for c in b.commands
           if c.key not in ELSEWHERE]
    print(f"{doc}: {len(run)} command(s) run by its session; marked: {marked}")
    assert doc in SESSIONS or not run, f"{doc}: commands with no session to run them: {run}"
