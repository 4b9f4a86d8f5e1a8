"""MedCopilot where researchers already run their evaluations: MedFlow-Bench as an Inspect AI task
(`inspect_task`, `inspect_tools`) and its `.eval` logs as result rows and back (`inspect_rows`). Inspect AI is an
optional extra (`pip install 'medcopilot[inspect]'`); nothing else in the core imports this package."""
