"""diagnose.remedy=auto: the story of attempts (story.py), which remedy comes next (policy.py), keep or
reject by outcome (judge.py), the summary and report (report.py), and the loop over attempts (driver.py)."""
