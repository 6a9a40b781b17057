"""One report model and its renderings; every front end renders the same `Report`.

model.py       Report, CaseResult, Status; who sees what (`view`, by audience and visibility)
terminal.py    the rich table, the failures, the score line; the pytest score table
markdown.py    feedback.md
gradescope.py  Gradescope's results.json
html.py        feedback pages (one per student) and the class dashboard, self-contained HTML
draw.py        the expression graph as a picture, with the wrong node highlighted
"""
