# Hostile submissions and the small suite they are graded with: data for
# tests/harness/test_sandbox_hostile.py, never tests themselves.
collect_ignore_glob = ["*"]
