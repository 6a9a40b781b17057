"""For instructors: what is generated from reference/ and what checks that nothing leaks.

template.py   student_template/ from reference/, solution regions replaced by stubs
leaks.py      solution lines and hidden cases' names and sources, found in any tree
"""
