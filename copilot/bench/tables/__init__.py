"""The report's tables from result rows alone: the paper's Tables 1–7 and Pass@k, the process tables (guards,
coverage, stability), the model table behind their row groups, and one neutral form rendered as HTML, Markdown
or CSV."""
